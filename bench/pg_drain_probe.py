"""Where a PostgreSQL drain spends its time: one worker, in this process, store calls timed.

Run by hand (not part of the test suite)::

    .venv/bin/python bench/pg_drain_probe.py                 # 50,000 due now, fresh tables
    .venv/bin/python bench/pg_drain_probe.py --analyse       # ANALYZE between enqueue and drain
    .venv/bin/python bench/pg_drain_probe.py -n 100000 --future   # all due at one instant

Schedules ``-n`` timers into a fresh database ``dtprobe`` (dropped first), then drains them with
one ``AsyncApp`` worker (no-op handler, ``--concurrency``) and prints the drain rate, the
worker's CPU per job, the rate the timers were scheduled at (batches of 1,000), and for
``claim_due``, ``finish`` and ``next_run_at``: calls, rows per call and wall time per call.
Smaller and quicker than ``pg_bench.py`` (no peers, no child
processes), for comparing one change with the next in alternating runs.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from duetime import AsyncApp, Event, TimerRequest

DB = "dtprobe"


def admin(base: str, sql: str) -> None:
    with psycopg.connect(base + "/postgres", autocommit=True) as conn:
        conn.execute(sql)


def timed(
    stats: dict[str, list[float]], name: str, call: Callable[..., Awaitable[Any]]
) -> Callable[..., Awaitable[Any]]:
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        result = await call(*args, **kwargs)
        entry = stats[name]
        entry[0] += 1
        entry[1] += len(result) if isinstance(result, list | set) else 0
        entry[2] += time.perf_counter() - started
        return result

    return wrapper


async def probe(args: argparse.Namespace) -> None:
    admin(args.base, f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    admin(args.base, f"CREATE DATABASE {DB}")
    url = f"{args.base}/{DB}?schema=duetime"
    n = args.n
    due_at = datetime.now(UTC) + timedelta(seconds=n / 5000 + 3)
    async with AsyncApp(url) as app:
        started = time.perf_counter()
        for _ in range(0, n, 1000):
            await app.timers.schedule_many(
                [
                    TimerRequest("probe", {}, at=due_at)
                    if args.future
                    else TimerRequest("probe", {}, delay=0)
                    for _ in range(1000)
                ]
            )
        enqueued = n / (time.perf_counter() - started)
    if args.analyse:
        with psycopg.connect(f"{args.base}/{DB}", autocommit=True) as conn:
            conn.execute("ANALYZE")

    app = AsyncApp(url, concurrency=args.concurrency, batch_size=args.batch_size)
    handled = 0
    all_done = asyncio.Event()

    @app.handler("probe")
    async def noop(event: Event) -> None:
        nonlocal handled
        handled += 1
        if handled >= n:
            all_done.set()

    await app.open()
    store = app.store
    stats: dict[str, list[float]] = defaultdict(lambda: [0, 0, 0.0])
    for name in ("claim_due", "finish", "next_run_at"):
        setattr(store, name, timed(stats, name, getattr(store, name)))
    worker = app.worker()
    task = asyncio.create_task(worker.run())
    if args.future:
        await asyncio.sleep(max(0.0, (due_at - datetime.now(UTC)).total_seconds()))
    started, cpu = time.perf_counter(), time.process_time()
    await all_done.wait()
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    worker.stop()
    await task
    await app.close()
    admin(args.base, f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    print(f"{n / seconds:,.0f} timers/s, worker CPU {cpu / n * 1e6:.1f} µs a job")
    print(f"  scheduled first: {enqueued:,.0f} timers/s (schedule_many, batches of 1,000)")
    for name, (calls, rows, spent) in stats.items():
        print(
            f"  {name}: {calls:.0f} calls, {rows / max(calls, 1):.1f} rows a call, "
            f"{spent / max(calls, 1) * 1000:.2f} ms a call"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("-n", type=int, default=50_000, help="timers (50,000)")
    parser.add_argument("--analyse", action="store_true", help="ANALYZE before draining")
    parser.add_argument("--future", action="store_true", help="all due at one future instant")
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--base", default="postgresql://postgres@127.0.0.1:5432")
    asyncio.run(probe(parser.parse_args()))


if __name__ == "__main__":
    main()
