"""Would a HOT claim, or a narrow queue table, pay? The claim's UPDATE on duetime's table, as it
is, re-indexed so that a claim changes no indexed column, and with the queue beside the table.

Run by hand (not part of the test suite)::

    .venv/bin/python bench/pg_layout_probe.py               # every layout, alternating, 2 rounds
    .venv/bin/python bench/pg_layout_probe.py --layouts current,queue
    .venv/bin/python bench/pg_layout_probe.py --layouts current,queue --bulk 10000000 --repeat 1

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

``--bulk N`` loads N pending timers with SQL instead, as ``pg_bench.py``'s 10M claim scenario
does (``load_pending``: every k-th row due in the past hour, the rest over the next 30 days), so
the claims find their rows scattered over a large table.

``queue`` moves pending and running work to a narrow table ``timer_queue`` (id, namespace,
run_at, attempt, lease) with its own pending and lease indexes: a claim updates queue rows and
only reads the timers it returns; a finish deletes the queue rows and updates the timers, which
keep no index naming the status, the lease or the firing times (fillfactor 80), so the finish
may be HOT. Also a measurement: the timers' other readers are not rewritten for it.
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
    # Since migration 0009 these three leave leased rows out: here they must not name the lease.
    "DROP INDEX timers_listing, timers_subject, timers_events",
    "CREATE INDEX timers_listing ON timers (namespace, id)",
    """CREATE INDEX timers_subject ON timers (namespace, subject, id)
        WHERE subject IS NOT NULL""",
    """CREATE INDEX timers_events ON timers (namespace, (coalesce(fired_at, completed_at)), id)
        WHERE coalesce(fired_at, completed_at) IS NOT NULL""",
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
QUEUE_LAYOUT = [
    """CREATE TABLE timer_queue (
        id bigint PRIMARY KEY, namespace text NOT NULL, run_at timestamptz NOT NULL,
        attempt integer NOT NULL DEFAULT 0, lease_owner text, lease_expires_at timestamptz,
        started_at timestamptz)""",
    """INSERT INTO timer_queue (id, namespace, run_at)
        SELECT id, namespace, run_at FROM timers WHERE status IN ('scheduled', 'retrying')""",
    """CREATE INDEX timer_queue_pending ON timer_queue (namespace, run_at)
        WHERE lease_expires_at IS NULL""",
    """CREATE INDEX timer_queue_leased ON timer_queue (lease_expires_at)
        WHERE lease_expires_at IS NOT NULL""",
    "DROP INDEX timers_pending, timers_leased, timers_dead, timers_local_pending, timers_schedule",
    "DROP INDEX timers_events",
    "ALTER TABLE timers SET (fillfactor = 80)",
    "VACUUM FULL timers",
    "VACUUM ANALYZE timer_queue",
]
QUEUE_CLAIM = """
WITH due AS (
    SELECT id FROM timer_queue
    WHERE namespace = 'default' AND lease_expires_at IS NULL AND run_at <= now()
    ORDER BY run_at LIMIT 100 FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE timer_queue SET lease_owner = 'probe', lease_expires_at = now() + interval '30 s',
        attempt = timer_queue.attempt + 1, started_at = now()
    FROM due WHERE timer_queue.id = due.id
    RETURNING timer_queue.id
)
SELECT timers.id FROM claimed JOIN timers USING (id)
"""
QUEUE_FINISH = """
WITH gone AS (
    DELETE FROM timer_queue WHERE id = ANY(%s) AND lease_owner = 'probe'
    RETURNING id, attempt
)
UPDATE timers SET status = 'done', completed_at = now(), updated_at = now(),
    attempts = gone.attempt
FROM gone WHERE timers.id = gone.id
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
            await app.timers.schedule_many(
                [TimerRequest("probe", {"n": start + i}, delay=0) for i in range(1000)]
            )


async def migrate(base: str) -> None:
    admin(base, f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    admin(base, f"CREATE DATABASE {DB}")
    async with AsyncApp(f"{base}/{DB}?schema=duetime") as app:
        await app.open()


def measure(base: str, layout: str, n: int, rounds: int, bulk: int) -> str:
    if bulk:
        from pg_bench import load_pending  # this folder's benchmark, run from here

        asyncio.run(migrate(base))
        conninfo = f"{base}/{DB}?options=-c%20search_path%3Dduetime"
        load_pending(conninfo, bulk, 2 * rounds * 100)
    else:
        asyncio.run(load(base, n))
    with psycopg.connect(f"{base}/{DB}", autocommit=True, options="-c search_path=duetime") as c:
        for statement in {"hot": HOT_LAYOUT, "queue": QUEUE_LAYOUT}.get(layout, []):
            c.execute(statement)
        c.execute("VACUUM ANALYZE timers")
        c.execute("CHECKPOINT")
        claim = CLAIM.format(pending="completed_at IS NULL" if layout == "hot" else "true")
        finish = FINISH
        if layout == "queue":
            claim, finish = QUEUE_CLAIM, QUEUE_FINISH
        claims: list[float] = []
        finishes: list[float] = []
        wal_start = c.execute("SELECT pg_current_wal_lsn()").fetchone()[0]  # type: ignore[index]
        for _ in range(rounds):
            started = time.perf_counter()
            ids = [row[0] for row in c.execute(claim)]
            claims.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            c.execute(finish, (ids,))
            finishes.append((time.perf_counter() - started) * 1000)
        wal = c.execute("SELECT pg_current_wal_lsn() - %s::pg_lsn", (wal_start,)).fetchone()
        updates = c.execute(
            "SELECT sum(n_tup_upd), sum(n_tup_hot_upd) FROM pg_stat_user_tables"
            " WHERE relname IN ('timers', 'timer_queue')"
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
    parser.add_argument("--layouts", default="current,hot,queue", help="(current,hot,queue)")
    parser.add_argument("--bulk", type=int, default=0, help="pending timers loaded by SQL (0)")
    parser.add_argument("--base", default="postgresql://postgres@127.0.0.1:5432")
    args = parser.parse_args()
    for _ in range(args.repeat):
        for layout in args.layouts.split(","):
            print(measure(args.base, layout, args.n, args.rounds, args.bulk), flush=True)


if __name__ == "__main__":
    main()
