"""The claim path stays an index scan on the partial pending index with 100k pending timers.

Checked before any ANALYZE (a fresh install under load, autovacuum off so it cannot sneak one in)
and after, with the custom plan psycopg gets for its first executions and the generic plan
PostgreSQL switches to for prepared statements.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from storekit import PG_URL

from duetime.model import ClaimFilter, FanOut, Finish, Outcome
from duetime.store.postgres.finish_batch import FinishBatch
from duetime.store.postgres.store import PostgresStore
from duetime.store.postgres.working import claim_params, fan_out_params
from duetime.store.queries import load_queries, query_files
from duetime.support.sealing import NO_SEALING

pytestmark = pytest.mark.slow  # fills tables large enough for the planner to show its choice

Q = load_queries("duetime.store.postgres", *query_files("duetime.store.postgres"))

PENDING = 100_000
PARAM_TYPES = {
    "namespace": "text",
    "types": "text[]",
    "patterns": "text[]",
    "destinations": "text[]",
    "handler_types": "text[]",
    "now": "timestamptz",
    "due_by": "timestamptz",
    "limit": "integer",
    "node_id": "text",
    "lease_until": "timestamptz",
    "claim_token": "bigint",
    "before": "timestamptz",
}
FILTERS: list[list[str] | ClaimFilter | None] = [
    None,
    ["t1", "t3"],
    # a node with a handler and routes: exact types, a glob, deliveries it serves
    ClaimFilter(types=("t1",), patterns=("t*",), destinations=("hook",), handler_types=("t1",)),
]


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


def plans(
    conn: psycopg.Connection[Any],
    query: str,
    params: dict[str, Any],
    types: Mapping[str, str] = PARAM_TYPES,
) -> dict[str, str]:
    """EXPLAIN output of ``query``: the custom plan and the generic (prepared) plan; ``types``
    names each parameter's SQL type for the prepared statement."""
    custom = "\n".join(row[0] for row in conn.execute("EXPLAIN " + query, params))
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match[1] not in names:
            names.append(match[1])
        return f"${names.index(match[1]) + 1}"

    numbered = re.sub(r"%\((\w+)\)[sb]", number, query)
    declared = ", ".join(types[name] for name in names)
    # The simple query protocol, so that $n belong to PREPARE, not to this statement.
    psycopg.ClientCursor(conn).execute(f"PREPARE planned ({declared}) AS {numbered}")
    conn.execute("SET plan_cache_mode = force_generic_plan")
    try:
        values = ", ".join(f"%({name})s::{types[name]}" for name in names)
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


def claim_due_params(types: list[str] | ClaimFilter | None) -> dict[str, Any]:
    now = datetime.now(UTC)
    return {
        "namespace": "ns1",
        **claim_params(types),
        "now": now,
        "due_by": now,
        "limit": 50,
        "node_id": "n1",
        "lease_until": now + timedelta(seconds=30),
        "claim_token": 1,
    }


def test_claim_path_uses_the_partial_index_before_and_after_analyze(
    conn: psycopg.Connection[Any],
) -> None:
    row = conn.execute("SELECT reltuples FROM pg_class WHERE oid = 'timers'::regclass").fetchone()
    assert row is not None
    assert row[0] < 0  # never analysed
    for moment in ("before ANALYZE", "after ANALYZE"):
        for types in FILTERS:
            queries = [
                ("claim_due", claim_due_params(types)),
                ("next_run_at", {"namespace": "ns2", **claim_params(types)}),
            ]
            if types is not None:  # a sweep is always given what the live nodes take
                sweep = {**claim_due_params(types), "before": datetime.now(UTC), "limit": 1000}
                queries.append(("sweep_unsubscribed", sweep))
            for name, params in queries:
                for kind, plan in plans(conn, Q[name], params).items():
                    print(f"--- {name}, {moment}, {kind} plan, types={types}\n{plan}")
                    assert_uses_pending_index(plan)
                    if name == "claim_due":  # each locked row updated where it was found
                        assert "Tid Scan on timers" in plan, plan
                        # urgent rows first: a probe of the (here empty) partial index
                        assert "Index Scan using timers_urgent on timers" in plan, plan
        conn.execute("ANALYZE timers")
        conn.execute("ANALYZE attempts")


def test_urgent_rows_are_found_through_their_own_index(conn: psycopg.Connection[Any]) -> None:
    """With urgent rows pending, the claim still walks indexes only: the urgent ones in
    priority order through timers_urgent, the normal ones through timers_pending; no sort."""
    conn.execute("UPDATE timers SET priority = 1 + id % 9 WHERE id % 1000 = 0")
    for moment in ("before ANALYZE", "after ANALYZE"):
        for types in FILTERS:
            # As the store runs it: after claim_in_order, in the claim's transaction. Left to
            # itself the planner reads the few urgent rows with a bitmap scan and a sort or
            # walks their index, as ANALYZE's random sample happens to estimate them.
            with conn.transaction():
                conn.execute(Q["claim_in_order"], {"claim_commit": "off"})
                found = plans(conn, Q["claim_due"], claim_due_params(types))
            for kind, plan in found.items():
                print(f"--- claim_due, urgent rows, {moment}, {kind} plan, types={types}\n{plan}")
                assert_uses_pending_index(plan)
                assert "Index Scan using timers_urgent on timers" in plan, plan
        conn.execute("ANALYZE timers")


def test_claim_takes_the_earliest_with_real_data(
    pg_url: str, conn: psycopg.Connection[Any]
) -> None:
    async def claim() -> list[datetime]:
        store = PostgresStore(pg_url, listen=False)
        await store.open(migrate=False)
        try:
            # How fast is for bench/pg_bench.py (--scenarios claim); here, which rows it takes
            # (the plan tests above show it walks the pending index, whatever the table's size).
            claimed = await store.claim_due(
                "ns0", None, datetime.now(UTC), 100, "n1", datetime.now(UTC)
            )
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


FAN_OUT_PARAM_TYPES = {
    "timer_ids": "bigint[]",
    "attempts": "integer[]",
    "notes": "text[]",
    "claim_tokens": "bigint[]",
    "root_ids": "bigint[]",
    "keys": "text[]",
    "destinations": "text[]",
    "node_id": "text",
    "now": "timestamptz",
}
FINISH_PARAM_TYPES = {
    "timer_ids": "bigint[]",
    "attempts": "integer[]",
    "outcomes": "text[]",
    "errors": "text[]",
    "run_ats": "timestamptz[]",
    "tracebacks": "text[]",
    "claim_tokens": "bigint[]",
    "started_ats": "timestamptz[]",
    "node_id": "text",
    "now": "timestamptz",
}


def test_finish_reaches_its_timers_by_primary_key_in_either_plan(
    conn: psycopg.Connection[Any],
) -> None:
    """A batch of outcomes finds its timers by primary key, custom plan or generic, before and
    after ANALYZE: never by reading the whole table, and never from the index of leased rows,
    whose estimate after an ANALYZE of a quiet table is one row (the plan then reads the running
    rows once per outcome: batch x running comparisons)."""
    conn.execute(
        "UPDATE timers SET status = 'running', attempts = 1, lease_owner = 'n1', "
        "lease_expires_at = now() + interval '1 minute' "
        "WHERE namespace = 'ns1' AND status = 'scheduled' AND id <= 6000"
    )
    conn.execute(
        "INSERT INTO attempts (timer_id, number, node_id, started_at) "
        "SELECT id, 1, 'n1', now() FROM timers WHERE status = 'running'"
    )
    ids = [row[0] for row in conn.execute("SELECT id FROM timers WHERE status = 'running'")]
    assert len(ids) > 1000
    now = datetime.now(UTC)
    params = FinishBatch.of(
        [Finish(i, 1, Outcome.DONE) for i in ids[:500]], "n1", now, NO_SEALING
    ).params
    fans = [FanOut(i, 1, f"k{i}", ("a", "b")) for i in ids[500:1000]]
    statements = [
        ("finish", params, FINISH_PARAM_TYPES),
        ("fan_out", fan_out_params(fans, "n1", now), FAN_OUT_PARAM_TYPES),
    ]
    for moment in ("before ANALYZE", "after ANALYZE"):
        found: dict[str, str] = {}
        for name, values, types in statements:
            with conn.transaction():  # as the store sends it: after finish_by_lookup
                conn.execute(Q["finish_by_lookup"])
                for kind, plan in plans(conn, Q[name], values, types).items():
                    found[f"{name} {kind}"] = plan
        for kind, plan in found.items():
            print(f"--- {moment}, {kind} plan\n{plan}")
            assert re.search(r"Scan (using|on) timers_pkey\b", plan), plan
            assert "timers_leased" not in plan, plan
            assert "Seq Scan" not in plan, plan
        conn.execute("ANALYZE timers")
        conn.execute("ANALYZE attempts")


def test_rescue_walks_the_index_of_leased_rows(conn: psycopg.Connection[Any]) -> None:
    """Expired leases are found through timers_leased (its predicate is the lease's presence,
    which ``lease_expires_at < now`` implies), not by reading every row."""
    conn.execute(
        "UPDATE timers SET status = 'running', attempts = 1, lease_owner = 'n1', "
        "lease_expires_at = now() - interval '1 minute' "
        "WHERE namespace = 'ns1' AND status = 'scheduled' AND id <= 600"
    )
    for moment in ("before ANALYZE", "after ANALYZE"):
        found = plans(conn, Q["rescue"], {"now": datetime.now(UTC)}, {"now": "timestamptz"})
        for kind, plan in found.items():
            print(f"--- rescue, {moment}, {kind} plan\n{plan}")
            assert "timers_leased" in plan, plan
            assert "Seq Scan on timers" not in plan, plan
        conn.execute("ANALYZE timers")
