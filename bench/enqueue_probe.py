"""What scheduling on PostgreSQL costs, and how the size of ``put_timers``' statements moves it.

Run by hand (not part of the test suite)::

    .venv/bin/python bench/enqueue_probe.py                      # chunks 100 and 1000, 3 rounds
    .venv/bin/python bench/enqueue_probe.py --chunks 50,100,250,1000 --rounds 2 -n 50000
    .venv/bin/python bench/enqueue_probe.py --chunks 100 --pgqueuer   # pgqueuer's enqueue too

Each round schedules ``-n`` timers (``schedule_many`` in batches of ``--batch``, due in an hour,
as ``pg_bench.py``'s mass-due scenario does) into a fresh database ``dtenqueue`` for every chunk
size in turn (``PUT_CHUNK``: timers a statement; 1,000 with batches of 1,000 is one statement a
batch, the layout before the pipelined chunks). It prints the rate, and this process's and
the server backend's CPU a timer: the client validates and encodes one chunk while the server
writes the one before, so the rate follows the larger of the two rather than their sum.
``--pgqueuer`` adds a round of pgqueuer's ``Queries.enqueue`` (the ``bench`` extra; the same
batches, as ``pg_bench.py`` sends them) after each of duetime's, with the same figures: it
sends a batch and waits for it, so its rate follows the sum of its client's and server's CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from datetime import UTC, datetime

import psycopg

import duetime.store.postgres.write_plan as write_plan
from duetime import AsyncApp, TimerRequest

DB = "dtenqueue"


def admin(base: str, sql: str) -> None:
    with psycopg.connect(base + "/postgres", autocommit=True) as conn:
        conn.execute(sql)


def backend_cpu(base: str, db: str = DB) -> float:
    """CPU seconds of every server process of database ``db`` (its pooled backends)."""
    with psycopg.connect(base + "/postgres", autocommit=True) as conn:
        pids = [
            row[0]
            for row in conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s", (db,))
        ]
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


async def one_round(base: str, n: int, batch: int) -> tuple[float, float, float]:
    admin(base, f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    admin(base, f"CREATE DATABASE {DB}")
    admin(base, "CHECKPOINT")
    async with AsyncApp(f"{base}/{DB}?schema=duetime") as app:
        due = time.time() + 3600
        at = datetime.fromtimestamp(due, UTC)
        server_before = backend_cpu(base)
        client_before = time.process_time()
        started = time.perf_counter()
        for _ in range(0, n, batch):
            await app.timers.schedule_many(
                [TimerRequest("bench.noop", {"due": due}, at=at) for _ in range(batch)]
            )
        seconds = time.perf_counter() - started
        client = time.process_time() - client_before
        server = backend_cpu(base) - server_before
    return n / seconds, client / n * 1e6, server / n * 1e6


async def pgqueuer_round(base: str, n: int, batch: int) -> tuple[float, float, float]:
    """pgqueuer's enqueue of ``n`` jobs due in an hour, as bench/peers/pgqueuer_peer.py sends
    them, on the driver it picks (asyncpg when installed)."""
    import json
    import sys
    from datetime import timedelta
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from peers.pgqueuer_peer import PgQueuerSystem
    from pgqueuer.queries import Queries

    admin(base, f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    admin(base, f"CREATE DATABASE {DB}")
    system = PgQueuerSystem(base)
    await system.install(DB)
    admin(base, "CHECKPOINT")
    driver, close = await system._connect(DB)
    try:
        queries = Queries(driver)
        due = time.time() + 3600
        server_before = backend_cpu(base)
        client_before = time.process_time()
        started = time.perf_counter()
        for _ in range(0, n, batch):
            await queries.enqueue(
                ["bench.noop"] * batch,
                [json.dumps({"due": due}).encode() for _ in range(batch)],
                [0] * batch,
                [timedelta(seconds=max(0.0, due - time.time()))] * batch,
            )
        seconds = time.perf_counter() - started
        client = time.process_time() - client_before
        server = backend_cpu(base) - server_before
    finally:
        await close()
    return n / seconds, client / n * 1e6, server / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument("-n", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--chunks", default="100,1000", help="PUT_CHUNK values, alternated")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pgqueuer", action="store_true", help="a pgqueuer round after each")
    args = parser.parse_args()
    chunks = [int(c) for c in args.chunks.split(",")]
    print(f"schedule_many of {args.n:,} timers in batches of {args.batch:,}")
    results: dict[int, list[tuple[float, float, float]]] = {c: [] for c in chunks}
    for _ in range(args.rounds):
        for chunk in chunks:
            write_plan.PUT_CHUNK = chunk
            rate, client, server = asyncio.run(one_round(args.base, args.n, args.batch))
            results[chunk].append((rate, client, server))
            print(
                f"  chunk {chunk:>5}: {rate:>8,.0f} timers/s, client CPU {client:5.1f} µs, "
                f"server backend CPU {server:5.1f} µs a timer",
                flush=True,
            )
        if args.pgqueuer:
            rate, client, server = asyncio.run(pgqueuer_round(args.base, args.n, args.batch))
            results.setdefault(0, []).append((rate, client, server))
            print(
                f"  pgqueuer:    {rate:>8,.0f} jobs/s,   client CPU {client:5.1f} µs, "
                f"server backend CPU {server:5.1f} µs a job",
                flush=True,
            )
    admin(args.base, f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    print("rates by chunk size:")
    for chunk, rows in results.items():
        label = f"{chunk:>5}" if chunk else "pgqueuer"
        print(f"  {label}: " + " / ".join(f"{rate:,.0f}" for rate, _, _ in rows) + " /s")


if __name__ == "__main__":
    main()
