"""The worker under test: ``python -m bench.chaoslib.worker ...`` (the harness starts it).

A plain duetime worker whose one handler records every start — key, attempt, node, the
reference clock's instant and the payload as received — in this node's append-only file
before doing anything else, then sleeps ``--handler-seconds``. Settings come from the options;
``archive_after`` is a day, so nothing leaves the hot tables during a run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

from bench.chaoslib.records import RecordFile, Start, start_line
from bench.chaoslib.refclock import ReferenceClock

from duetime import AsyncApp, Event
from duetime.runner import run_process

TYPE = "chaos.tick"
NAMESPACE = "chaos"


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

    @app.handler(TYPE)
    async def tick(event: Event) -> None:
        at_us = await clock.now_us()
        payload = json.dumps(event.payload, separators=(",", ":"))
        line = start_line(Start(event.key, event.attempt, args.node_id, at_us, payload))
        await asyncio.to_thread(record.write, [line])
        if args.handler_seconds:
            await asyncio.sleep(args.handler_seconds)

    try:
        run_process(app, node_id=args.node_id)
    finally:
        record.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
