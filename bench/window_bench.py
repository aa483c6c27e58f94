"""The even spread of a run window on PostgreSQL: its one-pass UPDATE, and the drain after it
beside the same timers without a window.

Run by hand (not part of the test suite)::

    .venv/bin/python bench/window_bench.py                  # 1,000,000 timers a round
    .venv/bin/python bench/window_bench.py --count 100000   # a quick run

Each round writes ``--count`` timers of one type due at one instant, in a fresh database
``dtwindow``: *plain* without a window, *even* with ``window=PT1H, spread=even`` (the store's
``put_timers`` in calls of 10,000, then ``store.spreads.spread`` once over the whole group: the
single UPDATE whose time and rows moved are printed). By default each timer
is written at its place in the group, as ``schedule_many`` places a group it holds whole, so
the UPDATE finds every row in place; ``--hashed`` writes them at their hashed instants, so the
UPDATE moves nearly every row (a group assembled from many puts). The instant is two hours ago,
so every timer of either kind is due when one ``AsyncApp`` worker (no-op handler) starts
draining them; the drain rate of each is printed, and the ratio of the even drain to the plain
one of the same pair of rounds (alternating plain, even, plain, even...). Note ``uptime``
beside the figures: on a shared machine a single round can be a tenth off.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from datetime import UTC, datetime, timedelta

import psycopg

from duetime import AsyncApp, Event
from duetime.model import NewTimer
from duetime.store.run_windows import SpreadGroup
from duetime.timemath.run_window import even_offset

DB = "dtwindow"
WINDOW = timedelta(hours=1)
CALL = 10_000


def admin(base: str, sql: str) -> None:
    with psycopg.connect(base + "/postgres", autocommit=True) as conn:
        conn.execute(sql)


async def one_round(args: argparse.Namespace, even: bool) -> dict[str, float]:
    admin(args.base, f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    admin(args.base, f"CREATE DATABASE {DB}")
    url = f"{args.base}/{DB}?schema=duetime"
    due_at = (datetime.now(UTC) - 2 * WINDOW).replace(microsecond=0)
    figures: dict[str, float] = {}
    async with AsyncApp(url) as app:
        store = app.store
        started = time.perf_counter()
        for first in range(0, args.count, CALL):
            timers = [
                NewTimer(
                    namespace="default",
                    key=f"greet-{i:08d}",
                    type="greet",
                    payload={"user": i},
                    due_at=due_at,
                    max_attempts=3,
                    window=WINDOW if even else None,
                    spread="even" if even else None,
                    run_at=due_at + even_offset(i, args.count, WINDOW)
                    if even and args.placed
                    else None,
                )
                for i in range(first, min(first + CALL, args.count))
            ]
            await store.put_timers(timers, "error", datetime.now(UTC))
        figures["insert_s"] = time.perf_counter() - started
        if even:
            started = time.perf_counter()
            moved = await store.spreads.spread([SpreadGroup("default", "greet", due_at, WINDOW)])
            figures["spread_s"] = time.perf_counter() - started
            figures["moved"] = moved
    with psycopg.connect(f"{args.base}/{DB}", autocommit=True) as conn:
        conn.execute("ANALYZE")
    app = AsyncApp(url, concurrency=args.concurrency, batch_size=args.batch_size)
    handled = 0
    all_done = asyncio.Event()

    @app.handler("greet")
    async def noop(event: Event) -> None:
        nonlocal handled
        handled += 1
        if handled >= args.count:
            all_done.set()

    await app.open()
    worker = app.worker()
    started = time.perf_counter()
    task = asyncio.create_task(worker.run())
    await all_done.wait()
    figures["drain_s"] = time.perf_counter() - started
    worker.stop()
    await task
    await app.close()
    admin(args.base, f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    return figures


async def bench(args: argparse.Namespace) -> None:
    mode = "placed at write" if args.placed else "hashed at write"
    print(f"load before: {os.getloadavg()[0]:.2f}; {args.count:,} timers a round; {mode}")
    ratios = []
    for pair in range(args.pairs):
        plain = await one_round(args, even=False)
        even = await one_round(args, even=True)
        ratio = even["drain_s"] / plain["drain_s"]
        ratios.append(ratio)
        print(
            f"pair {pair + 1}: plain drain {args.count / plain['drain_s']:,.0f}/s; "
            f"even drain {args.count / even['drain_s']:,.0f}/s (ratio {ratio:.3f}); "
            f"spread UPDATE {even['spread_s']:.2f} s over {args.count:,} rows, "
            f"{even['moved']:,.0f} moved; inserts "
            f"{plain['insert_s']:.1f} s plain, {even['insert_s']:.1f} s windowed; "
            f"load {os.getloadavg()[0]:.2f}"
        )
    print(
        f"even / plain drain time: {', '.join(f'{r:.3f}' for r in ratios)} "
        f"(mean {sum(ratios) / len(ratios):.3f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1_000_000, help="timers a round")
    parser.add_argument("--pairs", type=int, default=2, help="plain/even pairs of rounds")
    parser.add_argument(
        "--hashed", dest="placed", action="store_false", help="write at hashed instants"
    )
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--base", default="postgresql://postgres@127.0.0.1:5432")
    asyncio.run(bench(parser.parse_args()))


if __name__ == "__main__":
    main()
