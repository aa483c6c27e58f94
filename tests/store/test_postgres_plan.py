"""The claim path stays an index scan on the partial pending index with 100k pending timers.

Checked before any ANALYZE (a fresh install under load, autovacuum off so it cannot sneak one in)
and after, with the custom plan psycopg gets for its first executions and the generic plan
PostgreSQL switches to for prepared statements.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from storekit import PG_URL

from duetime.store.postgres.store import PostgresStore, Q

PENDING = 100_000
PARAM_TYPES = {
    "namespace": "text",
    "types": "text[]",
    "now": "timestamptz",
    "limit": "integer",
    "node_id": "text",
    "lease_until": "timestamptz",
}


@pytest.fixture
def conn(pg_url: str, pg_schema: str, runner: asyncio.Runner) -> Iterator[psycopg.Connection[Any]]:
    store = PostgresStore(pg_url, listen=False)
    runner.run(store.open())
    runner.run(store.close())
    with psycopg.connect(PG_URL, autocommit=True, options=f"-c search_path={pg_schema}") as c:
        c.prepare_threshold = None  # only the statements this test prepares itself
        c.execute("ALTER TABLE timers SET (autovacuum_enabled = false)")
        c.execute("ALTER TABLE attempts SET (autovacuum_enabled = false)")
        # 100k pending timers over three namespaces and five types, plus finished history.
        c.execute(
            """
            INSERT INTO timers (namespace, key, type, payload, due_at, run_at, status,
                                max_attempts, registered_at, updated_at)
            SELECT 'ns' || (i %% 3), 'k' || i, 't' || (i %% 5), '{}',
                   now() + (i - 50000) * interval '1 second',
                   now() + (i - 50000) * interval '1 second',
                   CASE WHEN i <= %(pending)s THEN 'scheduled' ELSE 'done' END,
                   3, now(), now()
            FROM generate_series(1, %(total)s) AS i
            """,
            {"pending": PENDING, "total": PENDING + 20_000},
        )
        yield c


def plans(conn: psycopg.Connection[Any], query: str, params: dict[str, Any]) -> dict[str, str]:
    """EXPLAIN output of ``query``: the custom plan and the generic (prepared) plan."""
    custom = "\n".join(row[0] for row in conn.execute("EXPLAIN " + query, params))
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match[1] not in names:
            names.append(match[1])
        return f"${names.index(match[1]) + 1}"

    numbered = re.sub(r"%\((\w+)\)s", number, query)
    types = ", ".join(PARAM_TYPES[name] for name in names)
    # The simple query protocol, so that $n belong to PREPARE, not to this statement.
    psycopg.ClientCursor(conn).execute(f"PREPARE planned ({types}) AS {numbered}")
    conn.execute("SET plan_cache_mode = force_generic_plan")
    try:
        values = ", ".join(f"%({name})s::{PARAM_TYPES[name]}" for name in names)
        rows = psycopg.ClientCursor(conn).execute(f"EXPLAIN EXECUTE planned ({values})", params)
        generic = "\n".join(row[0] for row in rows)
    finally:
        conn.execute("RESET plan_cache_mode")
        conn.execute("DEALLOCATE planned")
    return {"custom": custom, "generic": generic}


def assert_uses_pending_index(plan: str) -> None:
    assert re.search(r"Index (Only )?Scan using timers_pending on timers", plan), plan
    assert "Seq Scan" not in plan, plan
    assert "Bitmap" not in plan, plan  # a bitmap scan reads every pending row of the namespace
    assert "Sort" not in plan, plan  # the index yields run_at order: no sort of pending rows


def claim_params(types: list[str] | None) -> dict[str, Any]:
    now = datetime.now(UTC)
    return {
        "namespace": "ns1",
        "types": types,
        "now": now,
        "limit": 50,
        "node_id": "n1",
        "lease_until": now + timedelta(seconds=30),
    }


def test_claim_path_uses_the_partial_index_before_and_after_analyze(
    conn: psycopg.Connection[Any],
) -> None:
    row = conn.execute("SELECT reltuples FROM pg_class WHERE oid = 'timers'::regclass").fetchone()
    assert row is not None
    assert row[0] < 0  # never analysed
    for moment in ("before ANALYZE", "after ANALYZE"):
        for types in (None, ["t1", "t3"]):
            for name, params in (
                ("claim_due", claim_params(types)),
                ("next_run_at", {"namespace": "ns2", "types": types}),
            ):
                for kind, plan in plans(conn, Q[name], params).items():
                    print(f"--- {name}, {moment}, {kind} plan, types={types}\n{plan}")
                    assert_uses_pending_index(plan)
        conn.execute("ANALYZE timers")
        conn.execute("ANALYZE attempts")


def test_claim_takes_the_earliest_with_real_data(
    pg_url: str, conn: psycopg.Connection[Any]
) -> None:
    async def claim() -> list[datetime]:
        store = PostgresStore(pg_url, listen=False)
        await store.open(migrate=False)
        try:
            started = asyncio.get_running_loop().time()
            claimed = await store.claim_due(
                "ns0", None, datetime.now(UTC), 100, "n1", datetime.now(UTC)
            )
            elapsed = asyncio.get_running_loop().time() - started
            assert elapsed < 1.0, f"claiming 100 of {PENDING} took {elapsed:.3f} s"
            return [c.timer.run_at for c in claimed]
        finally:
            await store.close()

    run_ats = asyncio.run(claim())
    assert len(run_ats) == 100
    assert run_ats == sorted(run_ats)
    (earliest,) = conn.execute(
        "SELECT min(run_at) FROM timers WHERE namespace = 'ns0' AND status = 'running'"
    ).fetchone() or (None,)
    assert earliest == run_ats[0]
