"""Where the wall time of one ``schedule_many`` of 1,000 timers goes on PostgreSQL.

Run by hand (not part of the test suite)::

    .venv/bin/python bench/enqueue_timeline.py                 # 80 batches, the first 10 unreported
    .venv/bin/python bench/enqueue_timeline.py --batches 200

``pg_bench.py --scenarios enqueue`` gives the rate and each side's CPU; this splits a batch's
wall time into its phases, averaged over the batches after the first ``--warm-up``: the caller
building its ``TimerRequest`` list (as ``pg_bench.py``'s enqueue does), the first chunk
validated and encoded before anything is sent, the chunks sent while the server writes the ones
before (the pipeline), the last chunk, the wait for the server to finish what was sent (the
sync), the rows decoded and the results made after it, and the commit (its round trip and the
flush of the batch's WAL). While the client validates and encodes, the server writes; where it
falls behind, the sync waits. Beside the phases: this process's CPU and the server backends'
CPU a timer. The database ``--db`` is dropped and made again.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from datetime import UTC, datetime
from typing import Any

import psycopg
from enqueue_probe import backend_cpu
from psycopg import AsyncPipeline

import duetime.store.postgres.write_pipeline as write_pipeline
from duetime import AsyncApp, TimerRequest

BASE = "postgresql://postgres@127.0.0.1:5432"
PHASES = [
    ("built", "the caller's TimerRequest list"),
    ("first_sent", "the first chunk validated and encoded"),
    ("last_sent", "the next chunks, sent while the server writes"),
    ("sync_sent", "the last chunk"),
    ("synced", "the wait for the server (the sync)"),
    ("written", "rows decoded, results made"),
    ("returned", "the commit: its round trip and WAL flush"),
]


def instrument(marks: dict[str, float]) -> None:
    """Time-stamp the write path's phases into ``marks`` (the process's, for this probe only)."""
    execute, sync, write = write_pipeline._execute, AsyncPipeline.sync, write_pipeline.write_timers

    async def timed_execute(*args: Any, **kwargs: Any) -> Any:
        marks.setdefault("first_sent", time.perf_counter())
        marks["last_sent"] = time.perf_counter()
        return await execute(*args, **kwargs)

    async def timed_sync(self: AsyncPipeline) -> None:
        marks["sync_sent"] = time.perf_counter()
        await sync(self)
        marks["synced"] = time.perf_counter()

    async def timed_write(*args: Any, **kwargs: Any) -> Any:
        results = await write(*args, **kwargs)
        marks["written"] = time.perf_counter()
        return results

    write_pipeline._execute = timed_execute  # type: ignore[assignment]
    AsyncPipeline.sync = timed_sync  # type: ignore[method-assign]
    write_pipeline.write_timers = timed_write  # type: ignore[assignment]
    import duetime.store.postgres.writes as writes

    writes.write_timers = timed_write  # type: ignore[attr-defined]


async def probe(db: str, batches: int, warm_up: int) -> None:
    marks: dict[str, float] = {}
    instrument(marks)
    spent = {name: 0.0 for name, _ in PHASES}
    async with AsyncApp(f"{BASE}/{db}?schema=duetime") as app:
        due = time.time() + 3600
        at = datetime.fromtimestamp(due, UTC)
        for i in range(batches):
            if i == warm_up:
                server, client = backend_cpu(BASE, db), time.process_time()
            marks.clear()
            marks["start"] = time.perf_counter()
            requests = [TimerRequest("bench.noop", {"due": due}, at=at) for _ in range(1000)]
            marks["built"] = time.perf_counter()
            await app.timers.schedule_many(requests)
            marks["returned"] = time.perf_counter()
            if i >= warm_up:
                before = marks["start"]
                for name, _ in PHASES:
                    spent[name] += marks[name] - before
                    before = marks[name]
        timers = (batches - warm_up) * 1000
        client_us = (time.process_time() - client) / timers * 1e6
        server_us = (backend_cpu(BASE, db) - server) / timers * 1e6
    counted = batches - warm_up
    total = sum(spent.values()) / counted * 1000
    print(f"{counted} batches of 1,000 (after {warm_up} unreported): {total:.2f} ms a batch")
    for name, label in PHASES:
        print(f"  {label:45s} {spent[name] / counted * 1000:6.2f} ms")
    print(f"  client CPU {client_us:.1f} µs a timer, server backends' {server_us:.1f} µs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=80)
    parser.add_argument("--warm-up", type=int, default=10)
    parser.add_argument("--db", default="dtb_enqueue_timeline")
    args = parser.parse_args()
    with psycopg.connect(f"{BASE}/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {args.db} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {args.db}")
    try:
        asyncio.run(probe(args.db, args.batches, args.warm_up))
    finally:
        with psycopg.connect(f"{BASE}/postgres", autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {args.db} WITH (FORCE)")


if __name__ == "__main__":
    main()
