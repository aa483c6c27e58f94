"""The materialiser's queries use the partial index of active schedules by next occurrence.

50,000 schedules, most of them not due, checked before any ANALYZE (a fresh install).
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from storekit import PG_URL, StoreFactory

from duetime.store.codec import to_micros
from duetime.store.postgres.schedules import Q as PG
from duetime.store.sqlite.schedules import Q as LITE

COUNT = 50_000
NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


async def test_sqlite_due_path_uses_the_index(open_store: StoreFactory, tmp_path: Path) -> None:
    await open_store(f"sqlite:///{tmp_path / 'plan.db'}")
    with sqlite3.connect(tmp_path / "plan.db") as conn:
        conn.execute(
            """
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :count)
            INSERT INTO schedules (namespace, name, type, payload, cron, max_attempts, next_at,
                after_at, anchor_at, created_at, updated_at, active)
            SELECT 'ns' || (i % 3), 's' || i, 't', '{}', '* * * * *', 3, :now + i * 1000000,
                :now, :now, :now, :now, i % 10 <> 0
            FROM n
            """,
            {"count": COUNT, "now": to_micros(NOW)},
        )
        params = {
            "namespace": "ns1",
            "horizon": to_micros(NOW) + 5_000_000,
            "now": to_micros(NOW),
            "limit": 500,
        }
        for name in ("due_schedules", "next_schedule_at"):
            plan = " ".join(
                str(row[-1]) for row in conn.execute("EXPLAIN QUERY PLAN " + LITE[name], params)
            )
            assert "schedules_due" in plan, (name, plan)
            assert "TEMP B-TREE" not in plan, (name, plan)
        # A backlog's window: its range of ids, never every due row of the index.
        window = {**params, "horizon": params["horizon"] + 10**12, "first_id": 500, "stop_id": 1000}
        plan = " ".join(
            str(row[-1]) for row in conn.execute("EXPLAIN QUERY PLAN " + LITE["due_window"], window)
        )
        assert "INTEGER PRIMARY KEY (rowid>? AND rowid<?)" in plan, plan
        assert "TEMP B-TREE" not in plan, plan


async def test_postgres_due_path_uses_the_index(
    open_store: StoreFactory, pg_url: str, pg_schema: str
) -> None:
    await open_store(pg_url)
    schema = pg_schema
    with psycopg.connect(PG_URL, autocommit=True, options=f"-c search_path={schema}") as conn:
        conn.execute("ALTER TABLE schedules SET (autovacuum_enabled = false)")
        conn.execute(
            """
            INSERT INTO schedules (namespace, name, type, payload, cron, max_attempts, next_at,
                after_at, anchor_at, created_at, updated_at, active)
            SELECT 'ns' || (i %% 3), 's' || i, 't', '{}', '* * * * *', 3,
                %(now)s + i * interval '1 second', %(now)s, %(now)s, %(now)s, %(now)s,
                i %% 10 <> 0
            FROM generate_series(1, %(count)s) AS i
            """,
            {"count": COUNT, "now": NOW},
        )
        soon = {"namespace": "ns1", "horizon": NOW, "now": NOW, "limit": 500}
        for name in ("due_schedules", "lock_due_schedules", "next_schedule_at"):
            plan = explain(conn, PG[name], soon)
            assert "schedules_due" in plan, (name, plan)
            assert "Seq Scan" not in plan, (name, plan)
        # A backlog (every schedule due, e.g. after an outage, or a million added just now):
        # walk the index in order, a batch at a time, instead of sorting every due row for
        # each batch -- before any ANALYZE too, as the materialiser runs it (by_index first).
        backlog = {**soon, "horizon": NOW + timedelta(days=7), "now": NOW + timedelta(days=7)}
        unplanned = explain(conn, PG["lock_due_schedules"], backlog)
        assert "Sort" in unplanned, unplanned  # what by_index is there for
        with conn.transaction():
            conn.execute(PG["by_index"])
            plan = explain(conn, PG["lock_due_schedules"], backlog)
        assert "Index Scan using schedules_due" in plan, plan
        assert "Sort" not in plan, plan
        # A backlog's window: its range of ids from the primary key, not ANDed with every due
        # row of schedules_due (a bitmap of the whole backlog for each window).
        window = {**backlog, "first_id": 20_000, "stop_id": 20_500}
        for analysed in (False, True):
            if analysed:
                conn.execute("ANALYZE schedules")
            with conn.transaction():
                conn.execute(PG["by_index"])
                plan = explain(conn, PG["lock_due_window"], window)
            assert "schedules_pkey" in plan, plan
            assert "schedules_due" not in plan, plan
        for name in ("due_schedules", "lock_due_schedules"):
            plan = explain(conn, PG[name], backlog)
            assert "Index Scan using schedules_due" in plan, (name, plan)
            assert "Sort" not in plan, (name, plan)


def explain(conn: psycopg.Connection[Any], query: str, params: dict[str, Any]) -> str:
    rows = conn.execute("EXPLAIN " + query, params).fetchall()
    return "\n".join(str(next(iter(row))) for row in rows)
