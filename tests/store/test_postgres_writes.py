"""PostgreSQL: each way of writing timers (:mod:`duetime.store.postgres.writes`) on its own,
called directly rather than chosen by the planner: what it answers, what it stores, and whom it
wakes."""

from __future__ import annotations

from datetime import datetime, timedelta

import psycopg
import pytest
from psycopg import sql
from psycopg.rows import dict_row
from storekit import NOW, PG_URL, StoreFactory, new_timer, with_params

from duetime.errors import AlreadyExists, InvalidInput
from duetime.model import PutResult
from duetime.store.postgres.store import PostgresStore
from duetime.store.postgres.write_pipeline import put_query
from duetime.store.postgres.write_plan import PUT_CHUNK, PutCall


async def open_pg(open_store: StoreFactory, url: str) -> tuple[PostgresStore, list[datetime]]:
    """The store, and what it tells its wake-up listeners at once (not over LISTEN, which
    would hear the same NOTIFYs at a time of its own)."""
    store = await open_store(with_params(url, listen="false"))
    assert isinstance(store, PostgresStore)
    heard: list[datetime] = []
    store.add_wakeup_listener(lambda at: heard.append(at) if at is not None else None)
    return store, heard


def actions(results: list[PutResult] | Exception) -> list[str]:
    assert isinstance(results, list), results
    return [r.action for r in results]


async def test_fresh_draws_every_key_and_stores_them_all(
    pg_url: str, open_store: StoreFactory
) -> None:
    store, heard = await open_pg(open_store, pg_url)
    timers = [new_timer(None, timedelta(minutes=n), type="t", payload={"n": n}) for n in (3, 1, 2)]
    results = await store.writes.fresh(timers, NOW)
    assert actions(results) == ["created"] * 3
    keys = [r.timer.key for r in results]
    assert len(set(keys)) == 3
    for result, given in zip(results, timers, strict=True):
        stored = await store.get_timer("ns", result.timer.key)
        assert stored is not None
        assert (stored.payload, stored.due_at) == (given.payload, given.due_at)
    assert heard == [NOW + timedelta(minutes=1)]


async def test_a_fresh_timer_answered_is_the_timer_stored(
    pg_url: str, open_store: StoreFactory
) -> None:
    """A fresh insert returns only each row's id and key: the rest of the answer is made from
    what was sent and what a new row holds, and must be what a read of the row finds, field by
    field — by ``fresh`` and by a keyless batch of several statements."""
    store, _ = await open_pg(open_store, pg_url)
    options = {
        "subject": "customer-9",
        "correlation_id": "corr-1",
        "expires_after": timedelta(hours=2),
        "local": datetime(2026, 3, 29, 2, 30),
        "timezone": "Europe/London",
        "disambiguation": "later",
        "producer": "api",
        "trace_context": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "priority": 4,
    }
    alone = [new_timer(None, timedelta(minutes=3), type="t", payload={"n": 3}, **options)]
    plain = [new_timer(None, timedelta(minutes=n), type="t", payload={"n": n}) for n in (2, 1)]
    made = await store.writes.fresh([*alone, *plain], NOW)
    many = [new_timer(None, timedelta(seconds=n), type="u", payload=[n]) for n in range(230)]
    made += await store.writes.apart(many, "update", NOW)
    assert actions(made) == ["created"] * 233
    assert len({r.timer.key for r in made}) == 233
    for result in made:
        assert await store.get_timer("ns", result.timer.key) == result.timer
    assert (made[0].timer.subject, made[0].timer.priority) == ("customer-9", 4)
    assert [r.timer.payload for r in made[3:]] == [[n] for n in range(230)]


async def test_fresh_refuses_a_payload_postgresql_cannot_store_with_nothing_stored(
    pg_url: str, open_store: StoreFactory
) -> None:
    store, heard = await open_pg(open_store, pg_url)
    timers = [new_timer(None, type="t"), new_timer(None, type="t", payload={"x": "\u0000"})]
    with pytest.raises(psycopg.DataError):
        await store.writes.fresh(timers, NOW)
    assert sum((await store.count_by_status("ns")).values()) == 0
    assert heard == []


async def test_at_once_answers_each_caller_and_fails_only_its_own(
    pg_url: str, open_store: StoreFactory
) -> None:
    store, heard = await open_pg(open_store, pg_url)
    await store.put_timers([new_timer("kept"), new_timer("taken"), new_timer("old")], "error", NOW)
    heard.clear()
    later = NOW + timedelta(hours=1)
    calls = [
        PutCall([new_timer("new", later), new_timer("kept", later)], "keep", NOW),
        PutCall([new_timer("taken", payload={"again": 1})], "error", NOW),
        PutCall([new_timer("old", later, payload={"v": 2})], "update", NOW),
    ]
    first, second, third = await store.writes.at_once(calls)
    assert actions(first) == ["created", "kept"]
    assert isinstance(second, AlreadyExists)
    assert "'taken'" in str(second)
    assert actions(third) == ["updated"]
    taken = await store.get_timer("ns", "taken")
    old = await store.get_timer("ns", "old")
    kept = await store.get_timer("ns", "kept")
    assert taken is not None
    assert taken.payload == {"key": "taken"}
    assert old is not None
    assert old.payload == {"v": 2}
    assert kept is not None
    assert kept.due_at == NOW
    assert heard == [later]


async def test_at_once_refuses_a_payload_postgresql_cannot_store_for_every_caller(
    pg_url: str, open_store: StoreFactory
) -> None:
    """One implicit transaction: the planner's caller then writes the callers apart."""
    store, heard = await open_pg(open_store, pg_url)
    calls = [
        PutCall([new_timer("a")], "error", NOW),
        PutCall([new_timer("b", payload={"x": "\u0000"})], "error", NOW),
    ]
    with pytest.raises(psycopg.DataError):
        await store.writes.at_once(calls)
    assert await store.get_timer("ns", "a") is None
    assert heard == []


async def test_apart_writes_a_key_given_twice_in_order_and_more_than_a_statement(
    pg_url: str, open_store: StoreFactory
) -> None:
    store, heard = await open_pg(open_store, pg_url)
    many = [new_timer(f"k{n}", timedelta(minutes=n + 1)) for n in range(PUT_CHUNK + 5)]
    twice = [new_timer("twice", payload={"v": 1}), new_timer("twice", payload={"v": 2})]
    results = await store.writes.apart([*many, *twice, new_timer(None, type="t")], "update", NOW)
    assert actions(results) == ["created"] * (PUT_CHUNK + 5) + ["created", "updated", "created"]
    assert [r.timer.key for r in results[: PUT_CHUNK + 5]] == [t.key for t in many]
    stored = await store.get_timer("ns", "twice")
    assert stored is not None
    assert stored.payload == {"v": 2}
    assert sum((await store.count_by_status("ns")).values()) == PUT_CHUNK + 7
    assert heard == [NOW]


async def test_apart_stores_nothing_of_a_batch_one_of_whose_keys_exists(
    pg_url: str, open_store: StoreFactory
) -> None:
    store, heard = await open_pg(open_store, pg_url)
    await store.put_timers([new_timer("taken")], "error", NOW)
    heard.clear()
    with pytest.raises(AlreadyExists):
        await store.writes.apart([new_timer("a"), new_timer("taken")], "error", NOW)
    with pytest.raises(InvalidInput):
        await store.writes.apart([new_timer("b", payload={"x": "\u0000"})], "error", NOW)
    assert await store.get_timer("ns", "a") is None
    assert await store.get_timer("ns", "b") is None
    assert heard == []


async def test_grouped_isolates_the_callers_whose_timers_are_refused(
    pg_url: str, open_store: StoreFactory
) -> None:
    store, heard = await open_pg(open_store, pg_url)
    await store.put_timers([new_timer("taken"), new_timer("old")], "error", NOW)
    heard.clear()
    later = NOW + timedelta(minutes=5)
    calls = [
        PutCall([new_timer("a", later), new_timer("b", later)], "error", NOW),
        PutCall([new_timer("both-or-none"), new_timer("taken")], "error", NOW),
        PutCall([new_timer("bad", payload={"x": "\u0000"})], "keep", NOW),
        PutCall([new_timer("old", later, payload={"v": 2})], "update", NOW),
        PutCall([new_timer("taken")], "keep", NOW),
    ]
    first, second, third, fourth, fifth = await store.writes.grouped(calls)
    assert actions(first) == ["created", "created"]
    assert isinstance(second, AlreadyExists)
    assert isinstance(third, InvalidInput)
    assert actions(fourth) == ["updated"]
    assert actions(fifth) == ["kept"]
    for key, there in [("a", True), ("b", True), ("both-or-none", False), ("bad", False)]:
        assert (await store.get_timer("ns", key) is not None) is there, key
    old = await store.get_timer("ns", "old")
    assert old is not None
    assert old.payload == {"v": 2}
    assert heard == [later]


async def test_in_savepoint_is_part_of_the_callers_transaction(
    pg_url: str, open_store: StoreFactory
) -> None:
    store, heard = await open_pg(open_store, pg_url)
    path = sql.SQL("SET search_path TO {}").format(sql.Identifier(store.schema))
    async with await psycopg.AsyncConnection.connect(
        PG_URL, autocommit=True, row_factory=dict_row
    ) as conn:
        await conn.execute(path)
        async with conn.transaction():
            results = await store.writes.in_savepoint(
                conn, put_query("error"), [new_timer("a"), new_timer(None, type="t")], "error", NOW
            )
            assert actions(results) == ["created", "created"]
            with pytest.raises(AlreadyExists):  # its savepoint alone is rolled back
                await store.writes.in_savepoint(
                    conn, put_query("error"), [new_timer("b"), new_timer("a")], "error", NOW
                )
            assert await store.get_timer("ns", "a") is None  # not committed yet
        assert await store.get_timer("ns", "a") is not None
        assert await store.get_timer("ns", "b") is None
        async with conn.transaction(force_rollback=True):
            await store.writes.in_savepoint(conn, put_query("keep"), [new_timer("c")], "keep", NOW)
    assert await store.get_timer("ns", "c") is None
    assert heard == []  # a caller's NOTIFY is heard over LISTEN once it commits, not at once
