"""A worker process whose handlers misbehave on purpose (run as a script, not a test).

``worker``: runs a duetime worker of namespace ``ns`` on ``--url`` until SIGTERM/SIGINT.

- ``work`` events have a plain (sync) handler: it appends ``start,<key>,<attempt>,<pid>,<unix
  time>`` to ``--log`` as it begins, sleeps ``--delay`` seconds (``slow`` keys: ``--slow-delay``)
  and appends ``end,…``. Each line is one ``write`` to an ``O_APPEND`` file: it reaches the
  kernel before the handler goes on, so it survives SIGKILL/SIGSTOP of this process.
- every attempt's recorded start appends ``begun,<key>,<attempt>,<pid>,<unix time>``, the time
  being the instant the worker's lease check let the handler begin (for a plain handler, in its
  thread, right before the call), as the attempt's ``started_at`` records it. A handler's own
  ``start`` line is written a moment later, and a pause of the process may fall in between.
- ``exit.sync`` and ``exit.async`` events have a sync and an async handler that raise what
  their payload's ``raise`` names: ``SystemExit``, ``KeyboardInterrupt`` or ``BaseException``.
"""

from __future__ import annotations

import argparse
import os
import time
from datetime import datetime

from duetime import AsyncApp, Event
from duetime.app.runner import run_process
from duetime.model import Timer
from duetime.worker.completer import Completer

WORK = "work"
EXIT_SYNC = "exit.sync"
EXIT_ASYNC = "exit.async"
RAISED: dict[str, type[BaseException]] = {
    "SystemExit": SystemExit,
    "KeyboardInterrupt": KeyboardInterrupt,
    "BaseException": BaseException,
}


def worker(args: argparse.Namespace) -> int:
    app = AsyncApp(
        args.url,
        "ns",
        concurrency=args.concurrency,
        lease=args.lease,
        heartbeat=args.heartbeat,
        rescue_interval=args.rescue_interval,
        backoff_base=0.1,
        backoff_cap=0.2,
        shutdown_grace=30.0,
    )
    fd = os.open(args.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    pid = os.getpid()

    def log(what: str, event: Event) -> None:
        os.write(fd, f"{what},{event.key},{event.attempt},{pid},{time.time():.6f}\n".encode())

    record_start = Completer.started

    def started(completer: Completer, timer: Timer, at: datetime) -> None:
        record_start(completer, timer, at)
        line = f"begun,{timer.key},{timer.attempts},{pid},{at.timestamp():.6f}\n"
        os.write(fd, line.encode())

    Completer.started = started  # type: ignore[method-assign]

    @app.handler(WORK)
    def work(event: Event) -> None:
        log("start", event)
        time.sleep(args.slow_delay if event.key.startswith("slow") else args.delay)
        log("end", event)

    def raise_named(event: Event) -> None:
        log("start", event)
        payload = event.payload
        assert isinstance(payload, dict)
        raise RAISED[str(payload["raise"])]("raised by the handler")

    @app.handler(EXIT_SYNC)
    def exit_sync(event: Event) -> None:
        raise_named(event)

    @app.handler(EXIT_ASYNC)
    async def exit_async(event: Event) -> None:
        raise_named(event)

    try:
        run_process(app)
    finally:
        os.close(fd)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--slow-delay", type=float, default=1.0)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--lease", type=float, default=30.0)
    parser.add_argument("--heartbeat", type=float, default=10.0)
    parser.add_argument("--rescue-interval", type=float, default=5.0)
    return worker(parser.parse_args())


if __name__ == "__main__":
    raise SystemExit(main())
