"""The worker under test: ``python -m bench.chaoslib.worker ...`` (the harness starts it).

A plain duetime worker whose one handler records every start — key, attempt, node, the
reference clock's instant and the payload as received — in this node's append-only file
before doing anything else, then sleeps ``--handler-seconds``. With ``--sync-handlers`` the
handler is a plain ``def`` (run in a thread, sleeping with ``time.sleep``), else ``async``.
With ``--raise-every N`` the first attempt of every N-th timer (by its number) raises, after
recording its start, ``SystemExit``, ``KeyboardInterrupt`` or a bare ``BaseException`` in turn:
the attempt must fail and be retried, the worker must go on. Settings come from the options;
``archive_after`` is a day, so nothing leaves the hot tables during a run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import threading
import time
from pathlib import Path

from bench.chaoslib.records import RecordFile, Start, start_line
from bench.chaoslib.refclock import ReferenceClock

from duetime import AsyncApp, Event
from duetime.app.runner import run_process

TYPE = "chaos.tick"
NAMESPACE = "chaos"
RAISED: tuple[type[BaseException], ...] = (SystemExit, KeyboardInterrupt, BaseException)
"""What a handler raises under ``--raise-every``, in turn."""


def raised_by(key: str, attempt: int, every: int) -> type[BaseException] | None:
    """What the handler of ``key``'s ``attempt`` raises (None: nothing) under ``every``."""
    number = int(key[1:])
    if not every or attempt != 1 or number % every:
        return None
    return RAISED[number // every % len(RAISED)]


class ThreadClock:
    """The reference clock for sync handlers: one blocking connection per thread."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._local = threading.local()

    def now_us(self) -> int:
        sock: socket.socket | None = getattr(self._local, "sock", None)
        if sock is None:
            sock = self._local.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(self.path)
        sock.sendall(b"t")
        data = b""
        while len(data) < 8:
            chunk = sock.recv(8 - len(data))
            if not chunk:
                raise ConnectionError("the reference clock closed the connection")
            data += chunk
        return int.from_bytes(data, "big") // 1000


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--node-id", required=True)
    parser.add_argument("--records", type=Path, required=True)
    parser.add_argument("--clock", required=True, help="the reference clock's socket")
    parser.add_argument("--lease", type=float, default=4.0)
    parser.add_argument("--handler-seconds", type=float, default=0.01)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--sync-handlers", action="store_true")
    parser.add_argument("--raise-every", type=int, default=0)
    args = parser.parse_args()

    app = AsyncApp(
        args.url,
        NAMESPACE,
        concurrency=args.concurrency,
        batch_size=args.batch_size,
        lease=args.lease,
        heartbeat=args.lease / 4,
        rescue_interval=min(1.0, args.lease / 4),
        recheck=5.0,
        backoff_base=0.2,
        backoff_cap=2.0,
        shutdown_grace=5.0,
        archive_after="P1D",
    )
    record = RecordFile(args.records / f"starts-{args.node_id}.log")
    clock = ReferenceClock(args.clock)
    thread_clock = ThreadClock(args.clock)

    def line_of(event: Event, at_us: int) -> str:
        payload = json.dumps(event.payload, separators=(",", ":"))
        return start_line(Start(event.key, event.attempt, args.node_id, at_us, payload))

    def fail_if_asked(event: Event) -> None:
        raised = raised_by(event.key, event.attempt, args.raise_every)
        if raised is not None:
            raise raised(f"raised by the handler of {event.key}")

    async def tick(event: Event) -> None:
        await asyncio.to_thread(record.write, [line_of(event, await clock.now_us())])
        fail_if_asked(event)
        if args.handler_seconds:
            await asyncio.sleep(args.handler_seconds)

    def tick_sync(event: Event) -> None:
        record.write([line_of(event, thread_clock.now_us())])
        fail_if_asked(event)
        if args.handler_seconds:
            time.sleep(args.handler_seconds)

    app.handler(TYPE)(tick_sync if args.sync_handlers else tick)

    try:
        run_process(app, node_id=args.node_id)
    finally:
        record.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
