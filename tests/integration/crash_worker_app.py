"""A worker process for the crash-safety and multi-process tests (run as a script, not a test).

``worker``: runs a duetime worker on ``--db`` until SIGTERM/SIGINT. Its handler for ``work``
appends one line per delivery to ``--log``: ``start,<key>,<attempt>,<pid>,<unix time>`` when the
handler starts and ``end,…`` when it returns (after ``--delay`` seconds). Each line is one
``write`` to a file opened with ``O_APPEND``: it reaches the kernel before the handler goes on,
so it survives SIGKILL of this process (it is the process, not the machine, that dies here), and
lines from several processes never interleave.
With ``--idle-log``, each time the worker goes to sleep with nothing to claim it appends
``idle,<pid>,<next due time, ISO 8601, or "-">,<unix time>`` to that file (the ``idle`` hook).

``schedule``: stores ``--count`` timers of type ``work`` (keys ``t-00000``…) due evenly over
``--spread`` seconds from ``--start-in`` seconds from now, in batches of 1000, plus optionally
one ``--probe`` timer due ``--probe-in`` seconds from now, then exits.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from duetime import AsyncApp, Event, TimerRequest
from duetime.app.runner import run_process
from duetime.worker import WorkerObserver

WORK = "work"


class IdleLog(WorkerObserver):
    """Appends a line to ``path`` each time the worker goes to sleep with nothing to claim."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.pid = os.getpid()

    def idle(self, namespace: str, next_due: datetime | None) -> None:
        due = "-" if next_due is None else next_due.isoformat()
        os.write(self.fd, f"idle,{self.pid},{due},{time.time():.6f}\n".encode())


def asleep_towards(path: Path, due: datetime) -> set[int]:
    """The pids of the workers that reported (in the ``--idle-log`` at ``path``) going to sleep
    with ``due`` as the next due time they read."""
    if not path.exists():
        return set()
    whole = path.read_text().split("\n")[:-1]  # not a line being written
    lines = [line.split(",") for line in whole]
    return {int(pid) for _, pid, at, _ in lines if at != "-" and datetime.fromisoformat(at) == due}


def worker(args: argparse.Namespace) -> int:
    app = AsyncApp(
        args.db,
        concurrency=args.concurrency,
        batch_size=args.batch_size,
        lease=args.lease,
        heartbeat=args.heartbeat,
        rescue_interval=args.rescue_interval,
        recheck=args.recheck,
        shutdown_grace=args.shutdown_grace,
    )
    fd = os.open(args.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    pid = os.getpid()
    if args.idle_log:
        app.observers.append(IdleLog(args.idle_log))

    def log(what: str, event: Event) -> None:
        os.write(fd, f"{what},{event.key},{event.attempt},{pid},{time.time():.6f}\n".encode())

    @app.handler(WORK)
    async def work(event: Event) -> None:
        log("start", event)
        if args.delay:
            await asyncio.sleep(args.delay)
        log("end", event)

    run_process(app)
    os.close(fd)
    return 0


def schedule(args: argparse.Namespace) -> int:
    async def main() -> None:
        now = datetime.now(UTC)
        first = now + timedelta(seconds=args.start_in)
        step = timedelta(seconds=args.spread / max(1, args.count))
        async with AsyncApp(args.db) as app:
            if args.probe:
                probe_at = now + timedelta(seconds=args.probe_in)
                await app.schedule(WORK, None, at=probe_at, key=args.probe)
            for start in range(0, args.count, 1000):
                requests = [
                    TimerRequest(WORK, {"i": i}, at=first + i * step, key=f"t-{i:05d}")
                    for i in range(start, min(start + 1000, args.count))
                ]
                await app.timers.schedule_many(requests)

    asyncio.run(main())
    return 0


def main() -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("worker")
    w.add_argument("--db", required=True)
    w.add_argument("--log", required=True)
    w.add_argument("--idle-log")
    w.add_argument("--delay", type=float, default=0.0)
    w.add_argument("--concurrency", type=int, default=20)
    w.add_argument("--batch-size", type=int, default=500)
    w.add_argument("--lease", type=float, default=2.0)
    w.add_argument("--heartbeat", type=float, default=0.5)
    w.add_argument("--rescue-interval", type=float, default=0.5)
    w.add_argument("--recheck", type=float, default=30.0)
    w.add_argument("--shutdown-grace", type=float, default=30.0)
    s = sub.add_parser("schedule")
    s.add_argument("--db", required=True)
    s.add_argument("--count", type=int, default=0)
    s.add_argument("--start-in", type=float, default=0.5)
    s.add_argument("--spread", type=float, default=1.0)
    s.add_argument("--probe")
    s.add_argument("--probe-in", type=float, default=0.5)
    args = parser.parse_args()
    return worker(args) if args.command == "worker" else schedule(args)


if __name__ == "__main__":
    raise SystemExit(main())
