"""A bulk replay of many dead letters, and what it costs the writers running meanwhile.

Run by hand (not part of the test suite)::

    .venv/bin/python bench/bulk_probe.py                          # SQLite, 100,000 dead timers
    .venv/bin/python bench/bulk_probe.py --postgres -n 100000     # DUETIME_TEST_PG's server

It writes ``-n`` dead ``legacy.sync`` timers straight into a fresh database (SQLite: a file in a
temporary directory; PostgreSQL: a schema of its own, dropped afterwards), then replays them
all with one ``app.timers.bulk("replay", …)`` — batches of 1,000 rows, each its own transaction —
while another task schedules a timer every 10 ms. It prints the replay's time and the writer's
median and worst wait: a bulk action must never hold the locks of all its rows at once.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
import uuid
from pathlib import Path

import psycopg

from duetime import AsyncApp
from duetime.timer_filters import timer_filter

PG_URL = os.environ.get("DUETIME_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")

SQLITE_SEED = """
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {n})
INSERT INTO timers (namespace, key, type, payload, due_at, run_at, status, attempts,
    max_attempts, registered_at, updated_at, fired_at, completed_at, last_error)
SELECT 'shop', 'k' || i, 'legacy.sync', '{{}}', {now}, {now}, 'dead', 1, 1, {now}, {now},
    {now}, {now}, 'boom' FROM n
"""
PG_SEED = """
INSERT INTO timers (namespace, key, type, payload, due_at, run_at, status, attempts,
    max_attempts, registered_at, updated_at, fired_at, completed_at, last_error)
SELECT 'shop', 'k' || n, 'legacy.sync', '{{}}', now(), now(), 'dead', 1, 1, now(), now(),
    now(), now(), 'boom'
FROM generate_series(1, {n}) AS n;
INSERT INTO timer_keys (namespace, key, timer_id)
SELECT namespace, key, id FROM timers WHERE namespace = 'shop';
ANALYZE timers;
"""


async def probe(url: str, seed: str, n: int) -> None:
    app = AsyncApp(database_url=url, namespace="shop")
    await app.open()  # creates the schema; the dead timers are written behind its back
    try:
        if url.startswith("sqlite"):
            import sqlite3

            with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
                conn.execute(seed.format(n=n, now=int(time.time() * 1_000_000)))
        else:
            schema = url.split("schema=")[1]
            with psycopg.connect(PG_URL, options=f"-c search_path={schema}") as conn:
                conn.execute(seed.format(n=n))
        found = timer_filter(status="dead", type="legacy.*", now=app.clock.now())
        waits: list[float] = []
        done = asyncio.Event()

        async def writer() -> None:
            while not done.is_set():
                started = time.perf_counter()
                await app.schedule("probe", {}, delay="PT1H")
                waits.append(time.perf_counter() - started)
                await asyncio.sleep(0.01)

        task = asyncio.create_task(writer())
        started = time.perf_counter()
        changed = await app.timers.bulk("replay", found)
        took = time.perf_counter() - started
        done.set()
        await task
        waits.sort()
        print(
            f"{url.split(':')[0]}: replayed {changed:,} in {took:.2f} s "
            f"({changed / took:,.0f} rows/s); {len(waits)} schedule() calls meanwhile, "
            f"p50 {waits[len(waits) // 2] * 1000:.1f} ms, max {waits[-1] * 1000:.1f} ms"
        )
    finally:
        await app.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", type=int, default=100_000, help="dead timers to replay")
    parser.add_argument("--postgres", action="store_true", help="PostgreSQL, not SQLite")
    args = parser.parse_args()
    if not args.postgres:
        with tempfile.TemporaryDirectory() as tmp:
            asyncio.run(probe(f"sqlite:///{Path(tmp) / 'bulk.db'}", SQLITE_SEED, args.n))
        return
    schema = f"bulk_{uuid.uuid4().hex[:8]}"
    separator = "&" if "?" in PG_URL else "?"
    try:
        asyncio.run(probe(f"{PG_URL}{separator}schema={schema}", PG_SEED, args.n))
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


if __name__ == "__main__":
    main()
