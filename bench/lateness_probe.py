"""Where a timer's lateness goes: one PostgreSQL worker in this process, N timers due over S s.

Run by hand (not part of the test suite)::

    .venv/bin/python bench/lateness_probe.py                  # 5,000 timers over 20 s
    .venv/bin/python bench/lateness_probe.py --n 2000 --seconds 10 --db dtb_probe_a
    PYTHONPATH=/tmp/old/src .venv/bin/python bench/lateness_probe.py   # another commit's code

Per timer, at the moment its handler starts: its lateness on this machine's wall clock (the
figure ``pg_bench.py --scenarios lateness`` reports), and how far the worker's clock was behind
the wall clock then (on PostgreSQL the worker's "now" is a lower bound of the database's clock;
on one machine both clocks are the same, so this is the bound's lag, part of the lateness).
Beside them: the event loop's gaps (a 1 ms sleep that took over 3 ms) with how much of each gap
the process was on a core (little: it waited for one; most: its own work held the loop), and
the garbage collector's pauses. The database ``--db`` is dropped and made again.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import time
from datetime import UTC, datetime

import psycopg

from duetime import AsyncApp, Event, TimerRequest

BASE = "postgresql://postgres@127.0.0.1:5432"


def quantiles(values: list[float]) -> str:
    if len(values) < 2:
        return "n/a"
    q = statistics.quantiles(values, n=100, method="inclusive")
    return f"p50 {q[49]:.3f}  p95 {q[94]:.3f}  p99 {q[98]:.3f}  max {max(values):.2f} ms"


async def probe(db: str, n: int, seconds: float) -> None:
    url = f"{BASE}/{db}?schema=duetime"
    late: list[float] = []
    lag: list[float] = []
    gaps: list[tuple[float, float]] = []
    pauses: list[tuple[int, float]] = []
    began: dict[str, float] = {}

    def collected(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            began["gc"] = time.perf_counter()
        else:
            pauses.append((info["generation"], (time.perf_counter() - began["gc"]) * 1000))

    app = AsyncApp(url, concurrency=100, batch_size=500)
    clock = app.clock
    done = asyncio.Event()

    @app.handler("probe")
    async def handler(event: Event) -> None:
        wall = time.time()
        late.append((wall - event.payload["due"]) * 1000)
        lag.append((wall - clock.now().timestamp()) * 1000)
        if len(late) >= n:
            done.set()

    async def watch(stop: asyncio.Event) -> None:
        while not stop.is_set():
            wall, cpu = time.perf_counter(), time.process_time()
            await asyncio.sleep(0.001)
            gaps.append(((time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000))

    await app.open()
    stop = asyncio.Event()
    watcher = asyncio.create_task(watch(stop))
    worker = app.worker()
    running = asyncio.create_task(worker.run())
    gc.callbacks.append(collected)
    try:
        await asyncio.sleep(0.5)
        start = time.time() + 2.0
        dues = [start + seconds * i / n for i in range(n)]
        async with AsyncApp(url) as scheduler:
            for i in range(0, n, 1000):
                await scheduler.schedule_many(
                    [
                        TimerRequest("probe", {"due": due}, at=datetime.fromtimestamp(due, UTC))
                        for due in dues[i : i + 1000]
                    ]
                )
        await asyncio.wait_for(done.wait(), seconds + 30)
    finally:
        gc.callbacks.remove(collected)
        worker.stop()
        await running
        stop.set()
        await watcher
        await app.close()
    long = [(wall, cpu) for wall, cpu in gaps if wall > 3]
    busy = [gap for gap in long if gap[1] > gap[0] / 2]
    print(f"{n:,} timers over {seconds:g} s; load average {os.getloadavg()[0]:.2f} at the end")
    print(f"  lateness (wall clock):       {quantiles(late)}")
    print(f"  worker clock behind the wall: {quantiles(lag)}")
    print(
        f"  loop gaps over 3 ms: {len(long)} of {len(gaps)} sleeps of 1 ms, "
        f"{len(busy)} of them with the process on a core for most of the gap"
    )
    slowest = [(g, round(ms, 1)) for g, ms in sorted(pauses, key=lambda p: -p[1])[:5]]
    print(f"  GC pauses: {len(pauses)}, slowest (generation, ms): {slowest}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--db", default="dtb_lateness_probe")
    args = parser.parse_args()
    with psycopg.connect(f"{BASE}/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {args.db} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {args.db}")
    try:
        import uvloop
    except ImportError:
        asyncio.run(probe(args.db, args.n, args.seconds))
    else:
        uvloop.run(probe(args.db, args.n, args.seconds))


if __name__ == "__main__":
    main()
