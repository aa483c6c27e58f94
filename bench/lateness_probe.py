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
the garbage collector's pauses. For the starts later than ``--late`` ms, the kernel's own count
of the time the loop's thread spent runnable but off a core between the timer's instant and its
start (``/proc/thread-self/schedstat``, Linux): lateness that is the wait for a core, which no
change in the worker removes, against the rest. ``--busy K`` starts K processes that spin on
a core for the whole run (the loaded rounds). The database ``--db`` is dropped and made again.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import gc
import multiprocessing
import os
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path

import psycopg

from duetime import AsyncApp, Event, TimerRequest

BASE = "postgresql://postgres@127.0.0.1:5432"
SCHEDSTAT = Path("/proc/thread-self/schedstat")
LOADAVG = Path("/proc/loadavg")


def waited_for_core() -> float:
    """Milliseconds this thread has spent runnable but not running, since it started (0 where
    the kernel does not say)."""
    try:
        return int(SCHEDSTAT.read_text().split()[1]) / 1e6
    except (OSError, IndexError, ValueError):
        return 0.0


def runnable_now() -> int:
    """Processes running or waiting for a core on this machine at this moment."""
    return int(LOADAVG.read_text().split()[3].split("/")[0])


def spin() -> None:
    while True:
        pass


def quantiles(values: list[float]) -> str:
    if len(values) < 2:
        return "n/a"
    q = statistics.quantiles(values, n=100, method="inclusive")
    return f"p50 {q[49]:.3f}  p95 {q[94]:.3f}  p99 {q[98]:.3f}  max {max(values):.2f} ms"


async def probe(db: str, n: int, seconds: float, late_ms: float) -> None:
    url = f"{BASE}/{db}?schema=duetime"
    late: list[float] = []
    starts: list[tuple[float, float, float]] = []  # (instant, start) on perf_counter, and wait
    waits: list[tuple[float, float]] = []  # (perf_counter, waited_for_core) at the loop's turns
    runnable: list[int] = []  # processes running or waiting for a core, every 100 turns
    wall_to_perf = time.time() - time.perf_counter()
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
        starts.append((event.payload["due"] - wall_to_perf, time.perf_counter(), waited_for_core()))
        late.append((wall - event.payload["due"]) * 1000)
        lag.append((wall - clock.now().timestamp()) * 1000)
        if len(late) >= n:
            done.set()

    async def watch(stop: asyncio.Event) -> None:
        while not stop.is_set():
            wall, cpu = time.perf_counter(), time.process_time()
            waits.append((wall, waited_for_core()))
            if len(waits) % 100 == 0:
                runnable.append(runnable_now())
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
                await scheduler.timers.schedule_many(
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
    print(
        f"{n:,} timers over {seconds:g} s; load average {os.getloadavg()[0]:.2f} at the end; "
        f"processes runnable at once {statistics.median(runnable or [0]):g} at the median"
    )
    print(f"  lateness (wall clock):       {quantiles(late)}")
    early = [ms for ms in late if ms < 0]
    print(
        f"  started before their instant: {len(early)} of {len(late)}"
        + (f", the earliest by {-min(early):.3f} ms" if early else "")
    )
    print(f"  worker clock behind the wall: {quantiles(lag)}")
    print(
        f"  loop gaps over 3 ms: {len(long)} of {len(gaps)} sleeps of 1 ms, "
        f"{len(busy)} of them with the process on a core for most of the gap"
    )
    slowest = [(g, round(ms, 1)) for g, ms in sorted(pauses, key=lambda p: -p[1])[:5]]
    print(f"  GC pauses: {len(pauses)}, slowest (generation, ms): {slowest}")
    print(core_waits(starts, waits, late_ms))


def core_waits(
    starts: list[tuple[float, float, float]], waits: list[tuple[float, float]], late_ms: float
) -> str:
    """Of the starts later than ``late_ms``: how much of their lateness the loop's thread at
    least waited for a core. The count is read at the loop's turns; from the last turn before
    an instant to the start it may hold waits before the instant, so the time from that turn
    to the instant is taken off (a lower bound)."""
    turns = [at for at, _ in waits]
    shares: list[float] = []
    rest: list[float] = []
    for instant, started, waited_at_start in starts:
        lateness = (started - instant) * 1000
        i = bisect.bisect_right(turns, instant) - 1
        if lateness <= late_ms or i < 0:
            continue
        turn, waited_at_turn = waits[i]
        waited = max(0.0, waited_at_start - waited_at_turn - (instant - turn) * 1000)
        shares.append(min(waited / lateness, 1.0))
        rest.append(lateness - waited)
    if not shares:
        return f"  starts over {late_ms:g} ms late: none"
    over = sum(1 for r in rest if r > late_ms)
    return (
        f"  starts over {late_ms:g} ms late: {len(shares)}; of their lateness the loop waited "
        f"for a core {statistics.median(shares):.0%} at the median; {over} of them would be "
        f"over {late_ms:g} ms without that wait (the rest, p50 {statistics.median(rest):.2f} ms)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--db", default="dtb_lateness_probe")
    parser.add_argument("--late", type=float, default=5.0, help="ms: the starts to account for")
    parser.add_argument("--busy", type=int, default=0, help="processes spinning on a core")
    args = parser.parse_args()
    spinners = [multiprocessing.Process(target=spin, daemon=True) for _ in range(args.busy)]
    for spinner in spinners:
        spinner.start()
    with psycopg.connect(f"{BASE}/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {args.db} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {args.db}")
    try:
        import uvloop
    except ImportError:
        asyncio.run(probe(args.db, args.n, args.seconds, args.late))
    else:
        uvloop.run(probe(args.db, args.n, args.seconds, args.late))
    finally:
        for spinner in spinners:
            spinner.terminate()


if __name__ == "__main__":
    main()
