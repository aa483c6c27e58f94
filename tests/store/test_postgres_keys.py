"""PostgreSQL keys live in timer_keys (migration 0012), not in an index of the timers table:
claims and outcomes never write them, scheduling takes them there first, and whatever removes a
timer releases its key."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import psycopg
from storekit import NOW, PG_URL, StoreFactory, blocked_by, new_timer

from duetime.model import Finish, Outcome, Status
from duetime.store.postgres.schema import MIGRATIONS
from duetime.store.postgres.store import PostgresStore
from duetime.store.queries import load_queries, query_files

Q = load_queries("duetime.store.postgres", *query_files("duetime.store.postgres"))


def _connect(schema: str) -> psycopg.Connection[Any]:
    return psycopg.connect(PG_URL, autocommit=True, options=f"-c search_path={schema}")


def _keys(schema: str) -> list[tuple[Any, ...]]:
    with _connect(schema) as conn:
        return conn.execute(
            "SELECT key, timer_id, xmin::text FROM timer_keys ORDER BY key"
        ).fetchall()


async def test_claims_and_outcomes_leave_the_keys_alone(
    pg_url: str, pg_schema: str, open_store: StoreFactory
) -> None:
    """No index of timers names the key, and a job's claim and outcome write no key row."""
    store = await open_store(pg_url)
    (made,) = await store.put_timers([new_timer("a", type="t")], "error", NOW)
    before = _keys(pg_schema)
    assert [(key, timer_id) for key, timer_id, _ in before] == [("a", made.timer.id)]
    (claimed,) = await store.claim_due("ns", None, NOW, 10, "n1", NOW + timedelta(seconds=30))
    assert await store.finish([Finish(claimed.timer.id, 1, Outcome.DONE)], "n1", NOW) == set()
    assert _keys(pg_schema) == before  # the same row version: never rewritten
    with _connect(pg_schema) as conn:
        indexed = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = %s AND tablename = 'timers'",
            (pg_schema,),
        ).fetchall()
    assert indexed
    assert not [d for (d,) in indexed if "key" in d.split(" USING ", 1)[1]]


async def test_a_batch_takes_ids_in_input_order_whatever_its_keys(
    pg_url: str, open_store: StoreFactory
) -> None:
    """The key rows are made first, and the timers take the ids they were given, which follow
    the input (here 250 keys in descending order, over three statements)."""
    store = await open_store(pg_url)
    keys = [f"k{n:04d}" for n in range(250, 0, -1)]
    results = await store.put_timers([new_timer(k, type="t") for k in keys], "error", NOW)
    ids = [r.timer.id for r in results]
    assert [r.timer.key for r in results] == keys
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    for key in ("k0001", "k0250"):
        found = await store.get_timer("ns", key)
        assert found is not None
        assert found.key == key


async def test_removing_timers_releases_their_keys(
    pg_url: str, pg_schema: str, open_store: StoreFactory
) -> None:
    """Any DELETE or TRUNCATE of timers, the store's own or someone's SQL, frees the keys: they
    can be scheduled again, and never point at a timer that is gone."""
    store = await open_store(pg_url)
    await store.put_timers([new_timer(k, type="t") for k in ("a", "b", "c")], "error", NOW)
    with _connect(pg_schema) as conn:
        conn.execute("DELETE FROM timers WHERE key = 'a'")
        with conn.transaction():  # a data-modifying CTE, as the archive deletes
            conn.execute("WITH gone AS (DELETE FROM timers WHERE key = 'b' RETURNING id) SELECT 1")
    assert [key for key, _, _ in _keys(pg_schema)] == ["c"]
    (again,) = await store.put_timers([new_timer("a", type="t")], "error", NOW)
    assert again.action == "created"
    with _connect(pg_schema) as conn:
        conn.execute("TRUNCATE timers CASCADE")
    assert _keys(pg_schema) == []
    (fresh,) = await store.put_timers([new_timer("c", type="t")], "error", NOW)
    assert fresh.action == "created"


async def test_an_update_racing_a_new_key_lands_on_the_timer_the_other_batch_made(
    pg_url: str, open_store: StoreFactory
) -> None:
    """A batch that updates a key another transaction is making waits for it, then updates the
    timer it made (this statement's snapshot could not see it: the request runs again)."""
    store = await open_store(pg_url)
    assert isinstance(store, PostgresStore)
    other = await psycopg.AsyncConnection.connect(store.settings.conninfo)
    try:
        async with other.transaction():
            await store.outbox.put_timers_in(
                other, [new_timer("k", type="t", payload={"v": 1})], "update", NOW
            )
            racing = asyncio.ensure_future(
                store.put_timers(
                    [new_timer("k", type="t", payload={"v": 2}), new_timer("z", type="t")],
                    "update",
                    NOW,
                )
            )
            await blocked_by(other)
            assert not racing.done()  # waiting for the key
        first, second = await racing
    finally:
        await other.close()
    assert (first.action, first.timer.payload) == ("updated", {"v": 2})
    assert second.action == "created"
    stored = await store.get_timer("ns", "k")
    assert stored is not None
    assert (stored.payload, stored.id) == ({"v": 2}, first.timer.id)


async def test_migration_gives_existing_timers_their_keys(
    pg_fresh_url: str, pg_fresh_schema: str, open_store: StoreFactory
) -> None:
    """Timers stored before migration 0012 keep their keys: scheduling one again finds it.
    (The test makes the schema of an earlier version itself: a new one, not a pooled one.)"""
    with _connect(pg_fresh_schema) as conn, conn.transaction():
        conn.execute(f'CREATE SCHEMA "{pg_fresh_schema}"')
        conn.execute(Q["create_migrations_table"])
        for version, name, text in MIGRATIONS:
            if version >= 12:
                break
            conn.execute(text)  # type: ignore[call-overload]
            conn.execute(Q["record_migration"], {"version": version, "name": name})
        conn.execute(
            "INSERT INTO timers (namespace, key, type, payload, due_at, run_at, status,"
            " max_attempts, registered_at, updated_at)"
            " VALUES ('ns', 'old', 't', '{}', %s, %s, 'scheduled', 3, %s, %s)",
            (NOW, NOW, NOW, NOW),
        )
    store = await open_store(pg_fresh_url)
    (kept,) = await store.put_timers([new_timer("old", type="t")], "keep", NOW)
    assert (kept.action, kept.timer.status, kept.timer.payload) == ("kept", Status.SCHEDULED, {})
    assert [key for key, _, _ in _keys(pg_fresh_schema)] == ["old"]
