"""Group commit of concurrent single puts, on both stores.

Concurrent ``put_timers`` calls share a transaction: one caller's refused timers fail only that
caller, a commit that fails fails every caller of the batch and stores none of their timers, and
no caller hears back before the commit that holds its timers.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import psycopg
import pytest
from storekit import NOW, PG_URL, blocked_by, new_timer

from duetime.errors import AlreadyExists, InvalidInput, StoreUnavailable
from duetime.model import NewTimer, OnConflict, PutResult
from duetime.store import Store
from duetime.store.postgres.store import PostgresStore
from duetime.store.sqlite.store import SqliteStore

CALLERS = 20


def puts(store: Store, calls: Sequence[tuple[list[NewTimer], OnConflict]]) -> list[Any]:
    """The calls as concurrent tasks, all started in the same step of the loop."""
    loop = asyncio.get_running_loop()
    return [loop.create_task(store.put_timers(timers, rule, NOW)) for timers, rule in calls]


async def stored_keys(store: Store, keys: Sequence[str]) -> set[str]:
    return {k for k in keys if await store.get_timer("ns", k) is not None}


async def test_one_callers_conflict_fails_that_caller_alone(store: Store) -> None:
    await store.put_timers([new_timer("taken")], "error", NOW)
    calls: list[tuple[list[NewTimer], OnConflict]] = [
        ([new_timer(f"k{i}")], "update" if i % 2 else "keep") for i in range(CALLERS)
    ]
    calls.insert(7, ([new_timer("taken", payload={"again": 1})], "error"))
    calls.insert(12, ([new_timer("both-or-none"), new_timer("taken")], "error"))
    outcomes = await asyncio.gather(*puts(store, calls), return_exceptions=True)

    assert isinstance(outcomes[7], AlreadyExists)
    assert "'taken'" in str(outcomes[7])
    assert isinstance(outcomes[12], AlreadyExists)
    assert "'taken'" in str(outcomes[12])
    answered = [o for i, o in enumerate(outcomes) if i not in (7, 12)]
    assert all(isinstance(o, list) and [r.action for r in o] == ["created"] for o in answered)
    keys = [f"k{i}" for i in range(CALLERS)]
    assert await stored_keys(store, [*keys, "both-or-none"]) == set(keys)
    taken = await store.get_timer("ns", "taken")
    assert taken is not None
    assert taken.payload == {"key": "taken"}


async def test_callers_giving_the_same_key_are_answered_in_turn(store: Store) -> None:
    calls: list[tuple[list[NewTimer], OnConflict]] = [
        ([new_timer("first")], "keep"),  # alone: the others queue behind its commit
        ([new_timer("same", payload={"n": 1})], "error"),
        ([new_timer("same", payload={"n": 2})], "error"),
        ([new_timer("same", payload={"n": 3})], "keep"),
    ]
    first, one, two, three = await asyncio.gather(*puts(store, calls), return_exceptions=True)
    assert isinstance(first, list)
    assert isinstance(one, list)
    assert isinstance(three, list)
    assert one[0].action == "created"
    assert isinstance(two, AlreadyExists)
    assert three[0].action == "kept"
    assert three[0].timer.payload == {"n": 1}


async def test_no_caller_is_answered_before_its_commit(store: Store, make_store: Any) -> None:
    other: Store = await make_store()
    keys = [f"w{i}" for i in range(CALLERS)]
    async with writes_held(store, keys[1]) as in_flight:
        calls = puts(store, [([new_timer(k)], "error") for k in keys])
        await in_flight()
        # Another connection's reads come after every answer the held callers' statements
        # could have had: none is answered, and none of their timers is visible.
        assert await stored_keys(other, keys[1:]) == set()
        assert not any(call.done() for call in calls[1:])
    for call, key in zip(calls, keys, strict=True):
        result: list[PutResult] = await call
        assert await stored_keys(other, [key]) == {key}
        assert result[0].action == "created"


@contextlib.asynccontextmanager
async def writes_held(store: Store, key: str) -> AsyncIterator[Callable[[], Awaitable[None]]]:
    """Hold back the commit of a write of ``key`` until the block ends: SQLite's write lock is
    taken by another connection; on PostgreSQL another transaction holds the key's row. The
    block gets a wait for a write of this store to be held (on PostgreSQL: inside its
    transaction, its statements sent)."""
    if isinstance(store, SqliteStore):
        holder = sqlite3.connect(store._db.path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")

        async def queued() -> None:
            await asyncio.sleep(0.05)

        try:
            yield queued
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        return
    assert isinstance(store, PostgresStore)
    async with held_key(store, key) as holder:

        async def blocked() -> None:
            await blocked_backend(holder)

        yield blocked


@contextlib.asynccontextmanager
async def held_key(store: PostgresStore, key: str) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """Another transaction stores ``key`` and stays open until the block ends (rolled back)."""
    async with await psycopg.AsyncConnection.connect(PG_URL, autocommit=True) as holder:
        await holder.execute("BEGIN")
        try:
            await store.outbox.put_timers_in(holder, [new_timer(key)], "keep", NOW)
            yield holder
        finally:
            await holder.execute("ROLLBACK")


async def blocked_backend(holder: psycopg.AsyncConnection[Any]) -> int:
    """The backend that waits for ``holder``'s transaction (one)."""
    pids = await blocked_by(holder)
    assert len(pids) == 1
    return int(pids[0])


async def transactions_writing(store: Store, keys: Sequence[str]) -> int:
    """How many transactions wrote the timers of ``keys`` (PostgreSQL: their distinct xmin)."""
    assert isinstance(store, PostgresStore)
    async with await psycopg.AsyncConnection.connect(store.settings.conninfo) as conn:
        cur = await conn.execute(
            f"SELECT count(DISTINCT xmin::text) FROM {store.schema}.timers WHERE key = ANY(%s)",
            [keys],
        )
        row = await cur.fetchone()
    assert row is not None
    return int(row[0])


postgres_only = pytest.mark.parametrize("backend", ["postgres"])
"""PostgreSQL's own behaviour: its tests run on that backend alone."""


@postgres_only
async def test_concurrent_puts_share_one_transaction(store: Store) -> None:
    keys = [f"x{i}" for i in range(CALLERS)]
    await asyncio.gather(*puts(store, [([new_timer(k)], "error") for k in keys]))
    assert await transactions_writing(store, keys) == 2  # the first caller's, then the rest


@postgres_only
async def test_a_payload_postgres_refuses_fails_its_caller_alone(store: Store) -> None:
    keys = [f"p{i}" for i in range(CALLERS)]
    calls: list[tuple[list[NewTimer], OnConflict]] = [([new_timer(k)], "error") for k in keys]
    calls.insert(5, ([new_timer("nul", payload={"text": "a\u0000b"})], "error"))
    calls.insert(9, ([new_timer("nul-key\x00")], "update"))
    outcomes = await asyncio.gather(*puts(store, calls), return_exceptions=True)
    assert isinstance(outcomes[5], InvalidInput)
    assert outcomes[5].field == "payload"
    assert isinstance(outcomes[9], InvalidInput)
    assert outcomes[9].field == "key"
    assert await stored_keys(store, [*keys, "nul"]) == set(keys)


@postgres_only
async def test_a_batch_whose_connection_dies_fails_every_caller_and_stores_none(
    store: Store,
) -> None:
    assert isinstance(store, PostgresStore)
    keys = [f"d{i}" for i in range(CALLERS)]
    async with held_key(store, "blocked") as holder:
        first, *batch = puts(
            store, [([new_timer(k)], "error") for k in ["alone", *keys, "blocked"]]
        )
        await first  # the others queued meanwhile: their batch starts now, and waits
        pid = await blocked_backend(holder)
        await holder.execute("SELECT pg_terminate_backend(%s)", [pid])
        outcomes = await asyncio.gather(*batch, return_exceptions=True)
    assert all(isinstance(o, StoreUnavailable) for o in outcomes), outcomes
    assert await stored_keys(store, ["alone", "blocked", *keys]) == {"alone"}


@postgres_only
async def test_callers_whose_keys_are_drawn_share_one_statement(store: Store) -> None:
    """emit()s at once: the group is one statement (one transaction) and each caller gets its
    own timers back, in order."""
    calls: list[tuple[list[NewTimer], OnConflict]] = [
        ([new_timer(None, payload={"caller": i, "n": n}) for n in range(i % 3 + 1)], "error")
        for i in range(CALLERS)
    ]
    outcomes = await asyncio.gather(*puts(store, calls))
    for i, results in enumerate(outcomes):
        assert [r.action for r in results] == ["created"] * (i % 3 + 1)
        assert [r.timer.payload for r in results] == [
            {"caller": i, "n": n} for n in range(i % 3 + 1)
        ]
    keys = [r.timer.key for results in outcomes for r in results]
    assert len(set(keys)) == len(keys)
    assert await transactions_writing(store, keys) == 2  # the first caller's, then the rest


@postgres_only
async def test_a_drawn_keys_caller_postgres_refuses_fails_alone(store: Store) -> None:
    calls: list[tuple[list[NewTimer], OnConflict]] = [
        ([new_timer(None, payload={"caller": i})], "error") for i in range(CALLERS)
    ]
    calls.insert(6, ([new_timer(None, payload={"text": "a\u0000b"})], "error"))
    calls.insert(11, ([new_timer(None, type="bad\x00type")], "error"))
    outcomes = await asyncio.gather(*puts(store, calls), return_exceptions=True)
    assert isinstance(outcomes[6], InvalidInput)
    assert outcomes[6].field == "payload"
    assert isinstance(outcomes[11], InvalidInput)
    assert outcomes[11].field == "type"
    stored = [o for i, o in enumerate(outcomes) if i not in (6, 11)]
    assert all(isinstance(o, list) and o[0].action == "created" for o in stored)
    counts = await store.count_by_status("ns")
    assert sum(counts.values()) == CALLERS


async def test_callers_with_keys_of_their_own_keep_update_and_refuse_alike(store: Store) -> None:
    """A group of callers each with keys of its own (PostgreSQL: one round trip for all):
    kept timers come back as stored, updated ones changed, a single-timer ``error`` caller
    whose key exists fails alone, a ``keep`` caller of several timers gets each one's answer."""
    await store.put_timers(
        [
            new_timer("old-keep", payload={"v": 0}),
            new_timer("old-update", payload={"v": 0}),
            new_timer("old-many", payload={"v": 0}),
            new_timer("old-error", payload={"v": 0}),
        ],
        "error",
        NOW,
    )
    calls: list[tuple[list[NewTimer], OnConflict]] = [
        ([new_timer("alone")], "keep"),  # first: alone, the others queue behind its commit
        ([new_timer("old-keep", payload={"v": 1})], "keep"),
        ([new_timer("old-update", payload={"v": 1})], "update"),
        ([new_timer("old-keep", namespace="other", payload={"v": 1})], "error"),
        ([new_timer("new-error")], "error"),
        ([new_timer("many-1"), new_timer("old-many"), new_timer("many-2")], "keep"),
    ]
    calls.insert(4, ([new_timer("old-error", payload={"v": 2})], "error"))
    outcomes = await asyncio.gather(*puts(store, calls), return_exceptions=True)
    alone, kept, updated, other, refused, new_error, many = outcomes
    assert isinstance(alone, list)
    assert alone[0].action == "created"
    assert isinstance(kept, list)
    assert kept[0].action == "kept"
    assert kept[0].timer.payload == {"v": 0}
    assert isinstance(updated, list)
    assert updated[0].action == "updated"
    assert updated[0].timer.payload == {"v": 1}
    assert isinstance(other, list)
    assert other[0].action == "created"  # another namespace
    assert isinstance(refused, AlreadyExists)
    assert isinstance(new_error, list)
    assert new_error[0].action == "created"
    assert isinstance(many, list)
    assert [r.action for r in many] == ["created", "kept", "created"]
    assert many[1].timer.payload == {"v": 0}
    stored = await store.get_timer("ns", "old-update")
    assert stored is not None
    assert stored.payload == {"v": 1}
    untouched = await store.get_timer("ns", "old-error")
    assert untouched is not None
    assert untouched.payload == {"v": 0}


@postgres_only
async def test_an_update_racing_a_commit_of_its_key_is_made_again_on_its_own(
    store: Store,
) -> None:
    """A lone ``update`` goes out in one round trip; when another transaction commits the same
    key while it waits, the upsert cannot see that timer (its snapshot is older) and reports it
    unseen: the caller's write is made again on its own, and updates it."""
    assert isinstance(store, PostgresStore)
    async with await psycopg.AsyncConnection.connect(PG_URL, autocommit=True) as holder:
        await holder.execute("BEGIN")
        await store.outbox.put_timers_in(
            holder, [new_timer("raced", payload={"v": 0})], "keep", NOW
        )
        racing = asyncio.create_task(
            store.put_timers([new_timer("raced", payload={"v": 1})], "update", NOW)
        )
        await blocked_backend(holder)
        await holder.execute("COMMIT")
        (result,) = await racing
    assert result.action == "updated"
    assert result.timer.payload == {"v": 1}
    stored = await store.get_timer("ns", "raced")
    assert stored is not None
    assert stored.payload == {"v": 1}
    assert sum((await store.count_by_status("ns")).values()) == 1
