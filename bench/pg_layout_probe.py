"""Would a HOT claim pay? The claim's UPDATE on duetime's table, as it is and re-indexed so
that a claim changes no indexed column.

Run by hand (not part of the test suite)::

    .venv/bin/python bench/pg_layout_probe.py               # both layouts, alternating, 2 rounds

For each layout: a fresh database ``dtlayout`` with duetime's migrated schema, ``-n`` timers due
now (scheduled through the API, so rows are as wide as real ones), VACUUM ANALYZE and a
CHECKPOINT; then ``--rounds`` of claim 100 / finish those 100, each its own transaction, as
plain SQL on one connection. Printed: median claim and finish (ms), WAL per job, and how many
updates PostgreSQL could make HOT.

``current`` is the schema as migrated. ``hot`` drops the indexes whose key or predicate names
``status`` or the lease (``timers_pending``, ``timers_leased``, ``timers_dead``,
``timers_local_pending``, ``timers_schedule``), indexes pending work as ``completed_at IS NULL``
instead (the claim then skips running rows on the heap), and leaves 30 % of each page free
(fillfactor 70, VACUUM FULL), so the claim may update in place. It is a measurement, not a
layout that works: rescue, the dead-letter list and schedules lose their indexes.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import psycopg

from duetime import AsyncApp, TimerRequest

DB = "dtlayout"
HOT_LAYOUT = [
    "DROP INDEX timers_pending, timers_leased, timers_dead, timers_local_pending, timers_schedule",
    "CREATE INDEX timers_pending ON timers (namespace, run_at) WHERE completed_at IS NULL",
    "ALTER TABLE timers SET (fillfactor = 70)",
    "VACUUM FULL timers",
]
CLAIM = """
UPDATE timers SET status = 'running', attempts = attempts + 1, lease_owner = 'probe',
    lease_expires_at = now() + interval '30 s', updated_at = now()
WHERE id IN (
    SELECT id FROM timers
    WHERE namespace = 'default' AND status IN ('scheduled', 'retrying') AND run_at <= now()
      AND {pending}
    ORDER BY run_at LIMIT 100 FOR UPDATE SKIP LOCKED
)
RETURNING id
"""
FINISH = """
UPDATE timers SET status = 'done', completed_at = now(), updated_at = now(),
    lease_owner = NULL, lease_expires_at = NULL
WHERE id = ANY(%s) AND status = 'running'
"""


def admin(base: str, sql: str) -> None:
    with psycopg.connect(base + "/postgres", autocommit=True) as conn:
        conn.execute(sql)


async def load(base: str, n: int) -> None:
    admin(base, f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    admin(base, f"CREATE DATABASE {DB}")
    async with AsyncApp(f"{base}/{DB}?schema=duetime") as app:
        for start in range(0, n, 1000):
            await app.schedule_many(
                [TimerRequest("probe", {"n": start + i}, delay=0) for i in range(1000)]
            )


def measure(base: str, layout: str, n: int, rounds: int) -> str:
    asyncio.run(load(base, n))
    with psycopg.connect(f"{base}/{DB}", autocommit=True, options="-c search_path=duetime") as c:
        if layout == "hot":
            for statement in HOT_LAYOUT:
                c.execute(statement)
        c.execute("VACUUM ANALYZE timers")
        c.execute("CHECKPOINT")
        claim = CLAIM.format(pending="completed_at IS NULL" if layout == "hot" else "true")
        claims: list[float] = []
        finishes: list[float] = []
        wal_start = c.execute("SELECT pg_current_wal_lsn()").fetchone()[0]  # type: ignore[index]
        for _ in range(rounds):
            started = time.perf_counter()
            ids = [row[0] for row in c.execute(claim)]
            claims.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            c.execute(FINISH, (ids,))
            finishes.append((time.perf_counter() - started) * 1000)
        wal = c.execute("SELECT pg_current_wal_lsn() - %s::pg_lsn", (wal_start,)).fetchone()
        updates = c.execute(
            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'timers'"
        ).fetchone()
    admin(base, f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    assert wal is not None
    assert updates is not None
    return (
        f"{layout:8} claim of 100 {statistics.median(claims):.2f} ms, "
        f"finish of 100 {statistics.median(finishes):.2f} ms (medians), "
        f"WAL {int(wal[0]) / (rounds * 100):,.0f} B a job, "
        f"HOT {updates[1]:,} of {updates[0]:,} updates"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("-n", type=int, default=100_000, help="timers due now (100,000)")
    parser.add_argument("--rounds", type=int, default=300, help="claims and finishes (300)")
    parser.add_argument("--repeat", type=int, default=2, help="alternating rounds (2)")
    parser.add_argument("--base", default="postgresql://postgres@127.0.0.1:5432")
    args = parser.parse_args()
    for _ in range(args.repeat):
        for layout in ("current", "hot"):
            print(measure(args.base, layout, args.n, args.rounds), flush=True)


if __name__ == "__main__":
    main()
