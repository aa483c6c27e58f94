"""Retention on PostgreSQL: the claim path with a large history in the hot table, then archived.

Run by hand (not part of the test suite)::

    .venv/bin/python bench/retention_bench.py                      # 1,000,000 finished timers
    .venv/bin/python bench/retention_bench.py --finished 200000    # quicker
    .venv/bin/python bench/retention_bench.py --index-cost 20000   # + what timers_events costs

A fresh schema (``--schema``, dropped before and after) gets ``--finished`` done timers, each with
its attempt, finished over the last ``--days`` days (all older than ``archive_after`` and within
the retention), and ``--pending`` timers due now. Then:

1. claim latency — ``--claims`` claims of ``--batch`` timers each through ``PostgresStore``
   (median, p99), with the history in the hot table (vacuumed and analysed, as autovacuum leaves
   a table);
2. the archive — one ``maintain()`` round moving every finished timer to the history tables:
   rows per second;
3. claim latency again, right after the archive (dead tuples not yet vacuumed) and after a
   VACUUM ANALYZE; with the hot table's size before and after.

``--index-cost N`` also drains N timers (claim + finish, batches of 500, one process) with the
``timers_events`` index and without it, to show what the index costs the write path.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from psycopg import sql

from duetime.model import Finish, Outcome
from duetime.model.history import RetentionPolicy
from duetime.store.postgres.store import PostgresStore

POLICY = RetentionPolicy(retention=timedelta(days=30), archive_after=timedelta(hours=1))
EVENTS_INDEX = """
CREATE INDEX timers_events ON timers (namespace, (coalesce(fired_at, completed_at)), id)
    WHERE coalesce(fired_at, completed_at) IS NOT NULL
"""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--schema", default="dtbench_retention")
    parser.add_argument("--finished", type=int, default=1_000_000)
    parser.add_argument("--pending", type=int, default=20_000)
    parser.add_argument("--days", type=int, default=20)
    parser.add_argument("--claims", type=int, default=300)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--index-cost", type=int, default=0, metavar="N")
    parser.add_argument("--index-rounds", type=int, default=3, metavar="R")
    return parser.parse_args()


def connect(args: argparse.Namespace) -> psycopg.Connection[Any]:
    return psycopg.connect(args.url, autocommit=True, options=f"-c search_path={args.schema}")


def drop_schema(args: argparse.Namespace) -> None:
    with psycopg.connect(args.url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(args.schema))
        )


def fill(args: argparse.Namespace, now: datetime) -> float:
    """Finished timers (with attempts) and pending ones, in bulk; seconds taken."""
    started = time.perf_counter()
    with connect(args) as conn:
        conn.execute(
            """
            INSERT INTO timers (namespace, key, type, payload, subject, due_at, run_at, status,
                                attempts, max_attempts, registered_at, updated_at, fired_at,
                                completed_at)
            SELECT 'bench', 'done-' || i, 'order.paid', '{"order": 1}', 'user-' || (i %% 10000),
                   at, at, 'done', 1, 3, at, at, at, at + interval '5 ms'
            FROM generate_series(1, %(n)s) AS i,
                 LATERAL (SELECT %(now)s - interval '2 hours'
                          - (i::float8 / %(n)s) * %(days)s * interval '1 day' AS at) AS t
            """,
            {"n": args.finished, "now": now, "days": args.days},
        )
        conn.execute(
            """
            INSERT INTO attempts (timer_id, number, node_id, started_at, finished_at, outcome)
            SELECT id, 1, 'bench-node', fired_at, completed_at, 'done' FROM timers
            """
        )
        add_pending(conn, args.pending, now)
        conn.execute("VACUUM ANALYZE timers")
        conn.execute("VACUUM ANALYZE attempts")
    return time.perf_counter() - started


def add_pending(conn: psycopg.Connection[Any], n: int, now: datetime) -> None:
    conn.execute(
        """
        INSERT INTO timers (namespace, key, type, payload, due_at, run_at, status, max_attempts,
                            registered_at, updated_at)
        SELECT 'bench', 'pending-' || gen_random_uuid(), 'order.paid', '{}', at, at,
               'scheduled', 3, at, at
        FROM generate_series(1, %(n)s) AS i,
             LATERAL (SELECT %(now)s - (i %% 1000) * interval '1 ms' AS at) AS t
        """,
        {"n": n, "now": now},
    )


async def claim_latencies(store: PostgresStore, args: argparse.Namespace) -> list[float]:
    """Milliseconds per claim of ``--batch`` due timers (they stay claimed)."""
    now = datetime.now(UTC)
    times = []
    for _ in range(args.claims):
        started = time.perf_counter()
        claimed = await store.claim_due(
            "bench", None, now, args.batch, "bench-node", now + timedelta(minutes=5)
        )
        times.append((time.perf_counter() - started) * 1000)
        assert len(claimed) == args.batch, "ran out of pending timers: raise --pending"
    return times


def reset_claims(args: argparse.Namespace) -> None:
    """Put the claimed timers back to pending, so the next round claims the same kind of work."""
    with connect(args) as conn:
        conn.execute(
            """
            DELETE FROM attempts USING timers
            WHERE attempts.timer_id = timers.id AND timers.status = 'running'
            """
        )
        conn.execute(
            """
            UPDATE timers SET status = 'scheduled', attempts = 0, fired_at = NULL,
                              lease_owner = NULL, lease_expires_at = NULL
            WHERE status = 'running'
            """
        )
        conn.execute("VACUUM ANALYZE timers")


def hot_size(args: argparse.Namespace) -> str:
    with connect(args) as conn:
        row = conn.execute(
            "SELECT pg_size_pretty(pg_total_relation_size('timers')), (SELECT count(*) FROM timers)"
        ).fetchone()
    assert row is not None
    return f"{row[0]} ({row[1]:,} rows)"


def summary(times: list[float]) -> str:
    ordered = sorted(times)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"median {statistics.median(ordered):.2f} ms, p99 {p99:.2f} ms ({load()})"


async def drain(store: PostgresStore, n: int) -> float:
    """Claim and finish ``n`` due timers in batches of 500; timers per second."""
    started = time.perf_counter()
    done = 0
    while done < n:
        now = datetime.now(UTC)
        claimed = await store.claim_due(
            "drain", None, now, 500, "drainer", now + timedelta(minutes=5)
        )
        if not claimed:
            break
        finishes = [Finish(c.timer.id, c.attempt, Outcome.DONE) for c in claimed]
        await store.finish(finishes, "drainer", datetime.now(UTC))
        done += len(claimed)
    return done / (time.perf_counter() - started)


def backend_seconds(pid: int) -> float:
    """CPU seconds a PostgreSQL backend on this machine has used (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def index_cost(args: argparse.Namespace) -> None:
    """Drains with and without timers_events, interleaved (neighbours' load drifts)."""
    store = PostgresStore(f"{args.url}?schema={args.schema}&pool_max=1", listen=False)
    await store.open(migrate=False)
    pid = await _backend_pid(store)
    results: dict[str, list[tuple[float, float]]] = {"with": [], "without": []}
    try:
        with connect(args) as conn:
            conn.execute("TRUNCATE timers, attempts")
            for label in ["with", "without"] * args.index_rounds:
                conn.execute("DROP INDEX IF EXISTS timers_events")
                if label == "with":
                    conn.execute(EVENTS_INDEX)
                conn.execute(
                    """
                    INSERT INTO timers (namespace, key, type, payload, due_at, run_at, status,
                                        max_attempts, registered_at, updated_at)
                    SELECT 'drain', 'd-' || gen_random_uuid(), 't', '{}', now(), now(),
                           'scheduled', 3, now(), now()
                    FROM generate_series(1, %(n)s)
                    """,
                    {"n": args.index_cost},
                )
                conn.execute("VACUUM ANALYZE timers")
                conn.execute("VACUUM ANALYZE attempts")
                cpu = backend_seconds(pid)
                rate = await drain(store, args.index_cost)
                per_job = (backend_seconds(pid) - cpu) / args.index_cost * 1e6
                results[label].append((rate, per_job))
                conn.execute("TRUNCATE timers, attempts")
            conn.execute("DROP INDEX IF EXISTS timers_events")
            conn.execute(EVENTS_INDEX)
    finally:
        await store.close()
    for label, runs in results.items():
        rate = statistics.median(r for r, _ in runs)
        cpu_us = statistics.median(c for _, c in runs)
        print(
            f"drain of {args.index_cost:,} (claim + finish, 500 a batch, one process), "
            f"{label} timers_events: median {rate:,.0f}/s, backend CPU {cpu_us:.0f} µs/timer "
            f"({len(runs)} runs)"
        )


async def _backend_pid(store: PostgresStore) -> int:
    async def run(conn: Any) -> int:
        row = await (await conn.execute("SELECT pg_backend_pid()")).fetchone()
        return int(next(iter(row.values())))

    return await store._db.read(run)


def load() -> str:
    return "load average " + " ".join(f"{value:.1f}" for value in os.getloadavg())


async def main(args: argparse.Namespace) -> None:
    drop_schema(args)
    try:
        await history_figures(args)
        if args.index_cost:
            await index_cost(args)
    finally:
        drop_schema(args)


async def history_figures(args: argparse.Namespace) -> None:
    store = PostgresStore(f"{args.url}?schema={args.schema}", listen=False)
    await store.open()
    try:
        now = datetime.now(UTC)
        seconds = fill(args, now)
        print(
            f"filled {args.finished:,} finished timers (+ attempts) and {args.pending:,} "
            f"pending in {seconds:.1f} s"
        )
        print(f"hot table, history in it: {hot_size(args)}")
        before = await claim_latencies(store, args)
        print(f"claims of {args.batch}, history in the hot table: {summary(before)}")
        reset_claims(args)

        started = time.perf_counter()
        report = await store.history.maintain(POLICY, datetime.now(UTC))
        elapsed = time.perf_counter() - started
        print(
            f"archived {report.archived:,} timers (+ attempts) in {elapsed:.1f} s: "
            f"{report.archived / elapsed:,.0f} rows/s "
            f"({len(report.partitions_created)} partitions created; {load()})"
        )
        right_after = await claim_latencies(store, args)
        print(f"claims of {args.batch}, just archived (not vacuumed): {summary(right_after)}")
        reset_claims(args)
        print(f"hot table, archived and vacuumed (the space stays, for reuse): {hot_size(args)}")
        after = await claim_latencies(store, args)
        print(f"claims of {args.batch}, archived and vacuumed: {summary(after)}")

        started = time.perf_counter()
        idle = await store.history.maintain(POLICY, datetime.now(UTC))
        print(
            f"a round with nothing to do: {(time.perf_counter() - started) * 1000:.1f} ms "
            f"({idle.archived} archived)"
        )
    finally:
        await store.close()


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
