"""PostgreSQL's history tables: monthly partitions made ahead and dropped after the retention,
the shape the other migrations must keep, and query plans with a large history.

The plans are checked the way test_postgres_plan does it: before any ANALYZE (autovacuum off)
and after, as the custom plan and as the generic plan prepared statements switch to.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from storekit import PG_URL, new_timer
from test_postgres_plan import assert_uses_pending_index, claim_due_params, plans

from duetime.model import Finish, Outcome, TimerFilter
from duetime.model.history import EventFilter, RetentionPolicy
from duetime.store.cursors import timer_listing
from duetime.store.postgres import history
from duetime.store.postgres.store import PostgresStore
from duetime.store.queries import load_queries, query_files

Q = load_queries("duetime.store.postgres", *query_files("duetime.store.postgres"))

NOW = datetime(2025, 3, 21, 12, 0, tzinfo=UTC)
POLICY = RetentionPolicy(retention=timedelta(days=30), archive_after=timedelta(hours=1))
PENDING = 40_000
FINISHED = 60_000
ARCHIVED_KEY = "k40101"
"""Finished 101 times 20 minutes before NOW: archived by a round at NOW."""
TYPES = {
    "namespace": "text",
    "key": "text",
    "subject": "text",
    "status": "text",
    "type": "text",
    "type_like": "text",
    "type_glob": "text",
    "due_from": "timestamptz",
    "due_until": "timestamptz",
    "archive_before": "timestamptz",
    "delete_before": "timestamptz",
    "after_at": "timestamptz",
    "after_id": "bigint",
    "since": "timestamptz",
    "until": "timestamptz",
    "before_at": "timestamptz",
    "before_id": "bigint",
    "limit": "integer",
    "keys": "text[]",
    "payload_doc": "jsonb",
    "payload_path": "text",
    "payload_kind": "text",
    "payload_value": "text",
    "key_prefix": "text",
}


def explain(conn: psycopg.Connection[Any], query: str, params: dict[str, Any]) -> dict[str, str]:
    """The custom plan of ``query`` and its generic (prepared statement) plan, planned as the
    store plans it: in a transaction that asked to walk timers_events in order."""
    with conn.transaction():
        if query in (Q["archive_timers"], Q["delete_finished"], Q["list_events"]):
            conn.execute(Q["walk_in_index_order"])
        return plans(conn, query, params, TYPES)


@pytest.fixture
def store(pg_url: str, runner: asyncio.Runner) -> Iterator[PostgresStore]:
    opened = PostgresStore(pg_url, listen=False)
    runner.run(opened.open())
    yield opened
    runner.run(opened.close())


@pytest.fixture
def conn(store: PostgresStore, pg_schema: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(PG_URL, autocommit=True, options=f"-c search_path={pg_schema}") as c:
        c.prepare_threshold = None
        yield c


@pytest.fixture
def big(conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    """40k pending timers, and 60k done ones (with attempts) that finished over seven weeks."""
    for table in ("timers", "attempts"):
        conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
    conn.execute(
        """
        INSERT INTO timers (namespace, key, type, payload, subject, due_at, run_at, status,
                            attempts, max_attempts, registered_at, updated_at, fired_at,
                            completed_at)
        SELECT 'ns' || (i %% 2), 'k' || i, 't' || (i %% 5), '{}', 'user-' || (i %% 1000),
               finished, finished, CASE WHEN i <= %(pending)s THEN 'scheduled' ELSE 'done' END,
               CASE WHEN i <= %(pending)s THEN 0 ELSE 1 END, 3, finished, finished,
               CASE WHEN i <= %(pending)s THEN NULL ELSE finished END,
               CASE WHEN i <= %(pending)s THEN NULL ELSE finished + interval '1 second' END
        FROM generate_series(1, %(total)s) AS i,
             LATERAL (SELECT %(now)s - (i %% 4000) * interval '20 minutes' AS finished) AS f
        """,
        {"pending": PENDING, "total": PENDING + FINISHED, "now": NOW},
    )
    conn.execute(
        """
        INSERT INTO attempts (timer_id, number, node_id, started_at, finished_at, outcome)
        SELECT id, 1, 'n1', fired_at, completed_at, 'done' FROM timers WHERE status = 'done'
        """
    )
    return conn


def test_timer_history_mirrors_timers_column_for_column(conn: psycopg.Connection[Any]) -> None:
    """Archiving copies rows by position: a migration that adds a column to timers (or attempts)
    must add it to timer_history (attempt_history) as well, in the same place."""

    def columns(table: str) -> list[tuple[str, str]]:
        rows = conn.execute(
            """
            SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute
            WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum
            """,
            [table],
        )
        return [(name, kind) for name, kind in rows]

    assert columns("timer_history") == columns("timers")
    completed_at = ("completed_at", "timestamp with time zone")
    assert columns("attempt_history") == [completed_at, *columns("attempts")]


async def test_partitions_are_made_ahead_and_old_months_dropped(store: PostgresStore) -> None:
    report = await store.history.maintain(POLICY, NOW)  # retention reaches back to 2025-02-19
    months = ["2025_02", "2025_03", "2025_04", "2025_05"]
    made = [f"{parent}_{m}" for m in months for parent in history.PARENTS]
    assert report.partitions_created == tuple(made)
    assert await store.history._partitions() == set(made)
    assert (await store.history.maintain(POLICY, NOW)).partitions_created == ()
    # 2025-04-15: February ended before the retention's start (2025-03-16); March did not.
    report = await store.history.maintain(POLICY, datetime(2025, 4, 15, tzinfo=UTC))
    assert report.partitions_created == ("timer_history_2025_06", "attempt_history_2025_06")
    assert report.partitions_dropped == ("attempt_history_2025_02", "timer_history_2025_02")
    assert "timer_history_2025_03" in await store.history._partitions()


async def test_nodes_making_partitions_at_once_make_each_once(
    store: PostgresStore, pg_url: str
) -> None:
    others = [PostgresStore(pg_url, listen=False) for _ in range(3)]
    for other in others:
        await other.open(migrate=False)
    try:
        reports = await asyncio.gather(*(s.history.maintain(POLICY, NOW) for s in [store, *others]))
    finally:
        for other in others:
            await other.close()
    made = [name for report in reports for name in report.partitions_created]
    assert sorted(made) == sorted(await store.history._partitions())
    assert len(made) == 8


async def test_a_month_in_use_is_dropped_in_a_later_round(
    store: PostgresStore, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(history, "PARTITION_LOCK_TIMEOUT", "50ms")
    await store.history.maintain(POLICY, NOW)
    before = await store.history._partitions()
    later = datetime(2025, 4, 15, tzinfo=UTC)
    with psycopg.connect(PG_URL, options=f"-c search_path={pg_schema}") as reader:
        # a long read of the history: holds its locks until it ends
        reader.execute("SELECT count(*) FROM timer_history, attempt_history")
        report = await store.history.maintain(POLICY, later)
        assert (report.partitions_created, report.partitions_dropped) == ((), ())
        assert await store.history._partitions() == before
    report = await store.history.maintain(POLICY, later)
    assert report.partitions_created == ("timer_history_2025_06", "attempt_history_2025_06")
    assert report.partitions_dropped == ("attempt_history_2025_02", "timer_history_2025_02")


async def test_archived_rows_keep_their_attempts_and_partition(
    store: PostgresStore, conn: psycopg.Connection[Any]
) -> None:
    await store.put_timers([new_timer("a", NOW), new_timer("b", NOW)], "error", NOW)
    claimed = await store.claim_due("ns", None, NOW, 2, "n1", NOW + timedelta(minutes=1))
    finishes = [Finish(c.timer.id, c.attempt, Outcome.DONE) for c in claimed]
    await store.finish(finishes, "n1", NOW + timedelta(seconds=1))
    await store.history.maintain(POLICY, NOW + timedelta(hours=2))
    assert conn.execute("SELECT count(*) FROM timers").fetchone() == (0,)
    rows = conn.execute(
        "SELECT tableoid::regclass::text, key FROM timer_history ORDER BY key"
    ).fetchall()
    assert rows == [("timer_history_2025_03", "a"), ("timer_history_2025_03", "b")]
    attempts = conn.execute(
        "SELECT tableoid::regclass::text, timer_id, completed_at FROM attempt_history"
    ).fetchall()
    assert sorted(attempts) == sorted(
        ("attempt_history_2025_03", c.timer.id, NOW + timedelta(seconds=1)) for c in claimed
    )


@pytest.mark.slow
async def test_plans_with_a_large_history(
    store: PostgresStore, big: psycopg.Connection[Any]
) -> None:
    """The claim path keeps its partial index whether the history is in the hot table or
    archived; maintenance and history reads use their indexes, never a scan of a table."""
    conn = big
    hot = dict.fromkeys(["before archiving, not analysed", "before archiving, analysed"])
    for moment in hot:
        check_claim_path(conn, moment)
        check_maintenance(conn, moment)
        conn.execute("ANALYZE timers")
        conn.execute("ANALYZE attempts")
    archivable, expired = conn.execute(
        """
        SELECT count(*) FILTER (WHERE completed_at >= %(delete_before)s),
               count(*) FILTER (WHERE completed_at < %(delete_before)s)
        FROM timers WHERE completed_at < %(archive_before)s
        """,
        {"archive_before": POLICY.archive_before(NOW), "delete_before": POLICY.delete_before(NOW)},
    ).fetchone() or (0, 0)
    assert archivable > 30_000
    assert expired > 20_000
    report = await store.history.maintain(POLICY, NOW)
    assert (report.archived, report.deleted) == (archivable, expired)
    for moment in ("archived, not analysed", "archived, analysed"):
        check_claim_path(conn, moment)
        check_maintenance(conn, moment)
        check_history_reads(conn, moment)
        for table in ("timers", "attempts", "timer_history", "attempt_history"):
            conn.execute(f"ANALYZE {table}")
    listed = await store.history.list_events("ns1", EventFilter(type="t*"), None, 500)
    assert len(listed.items) == 500
    archived = await store.get_timer("ns1", ARCHIVED_KEY)
    assert archived is not None
    assert [a.outcome for a in await store.list_attempts(archived.id)] == [Outcome.DONE]
    page = await store.list_timers("ns0", TimerFilter(subject="user-2"), None, 1000)
    (count,) = conn.execute(
        """
        SELECT count(*) FROM (SELECT id FROM timers WHERE subject = 'user-2'
                              UNION ALL SELECT id FROM timer_history WHERE subject = 'user-2') t
        """
    ).fetchone() or (0,)
    assert len(page.items) == count > 50


def check_claim_path(conn: psycopg.Connection[Any], moment: str) -> None:
    for name in ("claim_due", "next_run_at"):
        params = {k: v for k, v in claim_due_params(None).items() if f"%({k})s" in Q[name]}
        for kind, plan in plans(conn, Q[name], params).items():
            print(f"--- {name}, {moment}, {kind} plan\n{plan}")
            # How the due rows are found (claim_due's first CTE; all of next_run_at).
            assert_uses_pending_index(plan.split("CTE claimed")[0])
            assert "timers_events" not in plan, f"{name} {kind}: {plan}"


def check_maintenance(conn: psycopg.Connection[Any], moment: str) -> None:
    params = {
        "namespace": "ns1",
        "archive_before": POLICY.archive_before(NOW),
        "delete_before": POLICY.delete_before(NOW),
        "after_at": datetime(1, 1, 1, tzinfo=UTC),
        "after_id": 0,
        "limit": 2000,
    }
    for name in ("archive_timers", "delete_finished"):
        for kind, plan in plan_of(conn, name, params, moment).items():
            batch = plan.split("CTE ")[1]  # the batch CTE: which rows, and how they are found
            assert batch.startswith("batch"), plan
            assert re.search(r"Index Scan using timers_events on timers", batch), plan
            for scan in ("Seq Scan", "Bitmap"):
                assert scan not in batch, f"{name} {kind}: {plan}"
            assert "Sort" not in batch, f"{name} {kind}: {plan}"


def check_history_reads(conn: psycopg.Connection[Any], moment: str) -> None:
    far = datetime(9999, 12, 31, tzinfo=UTC)
    listing = timer_listing("ns1", TimerFilter(), None, 50)
    reads: list[tuple[str, dict[str, Any]]] = [
        ("list_timers", listing),
        ("list_timers", {**listing, "status": "running"}),
        ("list_timers", {**listing, "subject": "user-7"}),
    ]
    reads += {
        "list_events": {
            "namespace": "ns1",
            "since": NOW - timedelta(days=7),
            "until": far,
            "before_at": far,
            "before_id": 2**63 - 1,
            "type_like": "t%",
            "limit": 51,
        },
        "get_timer": {"namespace": "ns1", "key": ARCHIVED_KEY},
    }.items()
    # Empty partitions (the months ahead) may be "scanned": they have no pages.
    filled = [
        row[0] for row in conn.execute("SELECT DISTINCT tableoid::regclass FROM timer_history")
    ]
    assert len(filled) == 2
    for name, params in reads:
        for kind, plan in plan_of(conn, name, params, moment).items():
            for table in ("timers", *filled):
                assert f"Seq Scan on {table} " not in plan, f"{name} {kind}: {plan}"
            assert "Bitmap Heap Scan on timers " not in plan, f"{name} {kind}: {plan}"


def plan_of(
    conn: psycopg.Connection[Any], name: str, params: dict[str, Any], moment: str
) -> dict[str, str]:
    found = explain(conn, Q[name], params)
    for kind, plan in found.items():
        print(f"--- {name}, {moment}, {kind} plan\n{plan}")
    return found
