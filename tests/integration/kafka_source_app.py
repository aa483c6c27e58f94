"""A worker process with a Kafka source, for the kill -9 tests (run as a script, not a test).

Consumes ``--topic`` as ``--group`` into ``--db`` next to a worker until SIGTERM; prints
``ready`` once SIGTERM is handled, and at the end the source's counts as JSON
(``{"created": n, "updated": n, "batches": n}``), then exits 0.

``--kill-before-commit N``: after the N-th batch's timers are committed to the database and
before its offsets are committed, the process sends itself SIGKILL — the window the source's
at-least-once promise is about.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
from typing import Any

from duetime import AsyncApp
from duetime.sources import run_worker_with_sources
from duetime.sources.kafka_source import KafkaSource
from duetime.testing.tansu import GROUP_CONFIG


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--servers", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--db", required=True)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--kill-before-commit", type=int, default=0)
    parser.add_argument("--tansu", action="store_true", help="use Tansu's group settings")
    args = parser.parse_args()
    asyncio.run(consume(args))


async def consume(args: argparse.Namespace) -> None:
    app = AsyncApp(args.db)
    source = KafkaSource(
        app,
        args.servers,
        args.topic,
        group=args.group,
        batch=args.batch,
        poll_timeout=0.2,
        retry_delay=0.2,
        client_config=dict(GROUP_CONFIG) if args.tansu else {},
    )
    batches = 0
    commit = source._commit

    async def commit_or_die(*a: Any, **kw: Any) -> None:
        nonlocal batches
        batches += 1
        if batches == args.kill_before_commit:  # the timers are stored, the offsets are not
            os.kill(os.getpid(), signal.SIGKILL)
        await commit(*a, **kw)

    source._commit = commit_or_die  # type: ignore[method-assign]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    print("ready", flush=True)  # SIGTERM now stops it cleanly
    with contextlib.suppress(asyncio.CancelledError):
        await run_worker_with_sources(app, [source], stop)
    await app.close()
    counts = {**source.stats.stored, "batches": batches}
    print(json.dumps(counts), flush=True)


if __name__ == "__main__":
    main()
