"""The pool of migrated schemas the PostgreSQL tests share (schema_pool): a schema is handed out
again only when a test could not tell it from a new one, and dropped otherwise."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql
from schema_pool import SchemaPool
from storekit import NOW, PG_URL, new_timer, require_pg, with_params

from duetime.model.history import RetentionPolicy
from duetime.store.postgres.store import PostgresStore


@pytest.fixture
def pool() -> Iterator[SchemaPool]:
    """A pool of this test's own (the process's pool serves the other tests meanwhile)."""
    require_pg()
    made = SchemaPool(PG_URL)
    if not made.enabled:
        pytest.skip("schemas are pooled only on Linux with a server reached over TCP")
    yield made
    made.close()


def connect(schema: str) -> psycopg.Connection[Any]:
    return psycopg.connect(PG_URL, autocommit=True, options=f"-c search_path={schema}")


def exists(schema: str) -> bool:
    with psycopg.connect(PG_URL) as conn:
        found = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", [schema])
        return found.fetchone() is not None


def tables(conn: psycopg.Connection[Any], schema: str) -> list[str]:
    rows = conn.execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY tablename", [schema]
    )
    return [name for (name,) in rows]


def contents(schema: str) -> dict[str, Any]:
    """Everything a test could read of a schema: every table's rows (the migrations' own but
    when they were applied), every sequence as it stands, the plan of a query on the table the
    store queries most."""
    with connect(schema) as conn:
        rows: dict[str, Any] = {}
        for table in tables(conn, schema):
            query = sql.SQL("SELECT * FROM {} ORDER BY 1").format(sql.Identifier(table))
            found = [tuple(row) for row in conn.execute(query)]
            if table == "schema_migrations":
                found = [(version, name) for version, name, _applied_at in found]
            rows[table] = found
        sequences = {
            name: conn.execute(
                sql.SQL("SELECT last_value, log_cnt, is_called FROM {}").format(
                    sql.Identifier(name)
                )
            ).fetchone()
            for (name,) in conn.execute(
                "SELECT sequencename FROM pg_sequences WHERE schemaname = %s", [schema]
            )
        }
        plan = conn.execute(
            "EXPLAIN SELECT id FROM timers WHERE namespace = 'ns' AND status = 'scheduled'"
            " AND run_at <= now() ORDER BY run_at LIMIT 10"
        ).fetchall()
    return {"rows": rows, "sequences": sequences, "plan": plan}


async def use_everything(schema: str) -> None:
    """Write to every table of the store and draw from every sequence, as busy tests do."""
    store = PostgresStore(with_params(PG_URL, schema=schema))
    await store.open()
    try:
        await store.ensure_namespace("ns", NOW)
        await store.put_timers([new_timer(f"k{i}") for i in range(30)], "update", NOW)
        claimed = await store.claim_due("ns", None, NOW, 5, "n1", NOW + timedelta(seconds=30))
        assert claimed
        await store.cancel("ns", "k20", NOW)
        await store.delete("ns", "k20", NOW)
    finally:
        await store.close()
    with connect(schema) as conn:
        for statement in (
            "INSERT INTO meta VALUES ('x', 'y', now())",
            "INSERT INTO tokens (name, hash, namespaces, created_at)"
            " VALUES ('ci', 'h', '{ns}', now())",
            "INSERT INTO schedules (namespace, name, type, payload, every, max_attempts,"
            " after_at, anchor_at, created_at, updated_at)"
            " VALUES ('ns', 's', 't', '{}', '5 minutes', 3, now(), now(), now(), now())",
            "INSERT INTO audit_log (namespace, at, actor, via, action, target, count)"
            " VALUES ('ns', now(), 'me', 'cli', 'delete', '{}', 1)",
            "INSERT INTO flow_limits (namespace, pattern, concurrency, updated_at)"
            " VALUES ('ns', 't*', 2, now())",
            "INSERT INTO nodes (id, host, pid, role, started_at, heartbeat_at)"
            " VALUES ('n1', 'h', 1, 'worker', now(), now())",
            "INSERT INTO attempts (timer_id, number, node_id, started_at)"
            " SELECT id, 1, 'n1', now() FROM timers LIMIT 1",
            "INSERT INTO timer_moves SELECT id, now(), 'tz', now(), 'UTC', now(), now()"
            " FROM timers LIMIT 1",
            "SELECT nextval('audit_log_id_seq')",
            "INSERT INTO sql_grants (role, namespace) VALUES ('app', 'ns')",
            "INSERT INTO sql_schedule_requests (namespace, name, action, requested_by,"
            " requested_at) VALUES ('ns', 's', 'pause', 'app', now())",
            "INSERT INTO schedule_watch (schedule_id, namespace, checked_through, updated_at)"
            " VALUES (1, 'ns', now(), now())",
            "INSERT INTO schedule_misses (schedule_id, nominal_at, namespace, schedule_name,"
            " reason, deadline_at, recorded_at) VALUES (1, now(), 'ns', 's', 'dead', now(), now())",
        ):
            conn.execute(statement)
        empty = [table for table, rows in contents(schema)["rows"].items() if not rows]
        assert empty == ["attempt_history", "timer_history"]  # partitioned: no partition yet


async def test_a_reused_schema_cannot_be_told_from_a_new_one(pool: SchemaPool) -> None:
    schema = pool.take()
    first = pool.kept_rows(schema)
    await use_everything(schema)
    assert pool.give_back(schema), pool.stats
    assert pool.take() == schema
    assert pool.stats.reused == 1
    new = pool._make()  # a schema migrated just now, never used
    try:
        assert pool.catalog(schema) == pool.catalog(new)
        assert pool.state(schema) == pool.state(new)
        assert contents(schema) == contents(new)
        assert pool.kept_rows(schema) == first  # the migrations' rows, when they were applied too
        # and it serves the next test as a new one would
        await use_everything(schema)
    finally:
        pool.give_back(new)
        pool.give_back(schema)


@pytest.mark.parametrize(
    "change",
    [
        "ALTER TABLE timers ADD COLUMN extra text",
        "ALTER TABLE nodes SET (fillfactor = 50)",
        "CREATE INDEX extra ON namespaces (created_at)",
        "DROP TABLE meta",
        "COMMENT ON TABLE tokens IS 'changed'",
        "GRANT SELECT ON timers TO PUBLIC",
        "ALTER TABLE timers DISABLE TRIGGER timers_clear_keys",
        "CREATE TABLE timer_history_2025_01 PARTITION OF timer_history"
        " FOR VALUES FROM ('2025-01-01') TO ('2025-02-01')",
    ],
)
def test_a_schema_whose_catalog_a_test_changed_is_dropped(pool: SchemaPool, change: str) -> None:
    schema = pool.take()
    with connect(schema) as conn:
        conn.execute(change)
    assert not pool.give_back(schema)
    assert pool.stats.dropped == {"its catalog changed": 1}
    assert not exists(schema)
    assert pool.free == ()


async def test_partitions_made_by_the_history_are_a_changed_catalog(pool: SchemaPool) -> None:
    schema = pool.take()
    store = PostgresStore(with_params(PG_URL, schema=schema), listen=False)
    await store.open()
    try:
        policy = RetentionPolicy(retention=timedelta(days=30), archive_after=timedelta(hours=1))
        assert (await store.history.maintain(policy, NOW)).partitions_created
    finally:
        await store.close()
    assert not pool.give_back(schema)
    assert pool.stats.dropped == {"its catalog changed": 1}


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("UPDATE schema_migrations SET applied_at = now()", "the migrations' rows changed"),
        ("DELETE FROM schema_migrations WHERE version = 1", "the migrations' rows changed"),
        # statistics an ANALYZE left would change the plans of the next test
        (
            "INSERT INTO namespaces SELECT 'n' || i, now() FROM generate_series(1, 100) AS i;"
            " ANALYZE namespaces",
            "its state differs from a new schema's",
        ),
    ],
)
def test_a_schema_whose_state_cannot_be_made_new_is_dropped(
    pool: SchemaPool, change: str, reason: str
) -> None:
    schema = pool.take()
    with connect(schema) as conn:
        conn.execute(change)
    assert not pool.give_back(schema)
    assert pool.stats.dropped == {reason: 1}
    assert not exists(schema)


def test_a_schema_a_connection_of_the_test_still_uses_is_dropped(pool: SchemaPool) -> None:
    schema = pool.take()
    with connect(schema) as conn:
        conn.execute("SELECT 1")
        assert not pool.give_back(schema)
    assert pool.stats.dropped == {
        "a connection this process opened during the test is still open": 1
    }


def test_a_schema_a_process_of_the_test_still_uses_is_dropped(pool: SchemaPool) -> None:
    schema = pool.take()
    env = {**os.environ, "DUETIME_DATABASE_URL": with_params(PG_URL, schema=schema)}
    sleeper = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE, env=env
    )
    try:
        assert not pool.give_back(schema)
    finally:
        sleeper.communicate(b"")
    assert pool.stats.dropped == {"a process started during the test still runs": 1}


def test_a_schema_a_server_backend_still_locks_is_not_free(pool: SchemaPool) -> None:
    """A backend whose client is not this test's (here: connected before the schema was handed
    out, as the backend of a process the test killed, finishing its statement)."""
    with psycopg.connect(PG_URL) as other:
        schema = pool.take()
        nodes = sql.Identifier(schema, "nodes")
        other.execute(sql.SQL("LOCK TABLE {} IN ACCESS SHARE MODE").format(nodes))
        assert pool.in_use(schema) == "a server backend still works in it"
        other.commit()
        assert pool.in_use(schema) is None
        other.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [f"duetime:tokens:{schema}"]
        )
        assert pool.in_use(schema) == "a server backend still works in it"
        other.commit()
        assert pool.give_back(schema), pool.stats


def test_a_schema_whose_processes_ended_is_reused(pool: SchemaPool) -> None:
    schema = pool.take()
    env = {**os.environ, "DUETIME_DATABASE_URL": with_params(PG_URL, schema=schema)}
    subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
    with connect(schema) as conn:
        conn.execute(
            "INSERT INTO nodes (id, host, pid, role, started_at, heartbeat_at)"
            " VALUES ('n', 'h', 1, 'worker', now(), now())"
        )
    assert pool.give_back(schema), pool.stats
    assert pool.free == (schema,)


def test_closing_the_pool_drops_its_schemas(pool: SchemaPool) -> None:
    schemas = [pool.take(), pool.take()]
    for schema in schemas:
        assert pool.give_back(schema)
    pool.close()
    assert pool.free == ()
    assert not any(exists(schema) for schema in schemas)
