"""A request's budget (duetime.support.budgets) on each store: a request that cannot reach the
database in time, or whose statement runs too long, ends at once with StoreBusy (a 503 over REST),
and work outside a request is never cut short.

Each test blocks the database for real: PostgreSQL's pool connections are held or a table is
locked from another session; SQLite's one connection thread is kept busy.
"""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import psycopg
import pytest
from storekit import NOW, PG_URL, StoreFactory, new_timer, with_params

from duetime.errors import StoreBusy
from duetime.model.flow_rules import FlowRule
from duetime.store.postgres.store import PostgresStore
from duetime.store.sqlite.database import READERS
from duetime.store.sqlite.store import SqliteStore
from duetime.support import budgets
from duetime.support.budgets import Budget, checked

WAIT = 30.0
QUICK = Budget(statement_timeout=0.3, connection_wait=0.2)


@asynccontextmanager
async def thread_held(store: SqliteStore) -> AsyncIterator[None]:
    """Keep SQLite's connection thread busy (as a long write would) until the block ends."""
    entered, release = threading.Event(), threading.Event()

    def hold(conn: sqlite3.Connection) -> None:
        entered.set()
        release.wait(WAIT)

    holding = asyncio.ensure_future(store._db.read(hold))
    try:
        assert await asyncio.to_thread(entered.wait, WAIT)
        yield
    finally:
        release.set()
        await holding


@asynccontextmanager
async def readers_held(store: SqliteStore) -> AsyncIterator[None]:
    """Keep every reader of requests busy (as other requests' long reads would)."""
    entered = [threading.Event() for _ in range(READERS)]
    release = threading.Event()

    def hold(started: threading.Event) -> Callable[[sqlite3.Connection], None]:
        def run(conn: sqlite3.Connection) -> None:
            started.set()
            release.wait(WAIT)

        return run

    with budgets.within(Budget(statement_timeout=WAIT, connection_wait=WAIT)):
        holding = [asyncio.ensure_future(store._db.read(hold(e))) for e in entered]
    try:
        for started in entered:
            assert await asyncio.to_thread(started.wait, WAIT)
        yield
    finally:
        release.set()
        await asyncio.gather(*holding)


async def test_sqlite_a_read_that_cannot_start_in_time_is_busy(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    store = await open_store(f"sqlite:///{tmp_path / 'busy.db'}")
    assert isinstance(store, SqliteStore)
    async with readers_held(store):
        with budgets.within(QUICK), pytest.raises(StoreBusy) as busy:
            await store.limits.list_rules("ns")
        assert "connection_wait" in busy.value.message
    with budgets.within(QUICK):
        assert await store.limits.list_rules("ns") == []  # the readers serve the next one


async def test_sqlite_a_requests_read_never_waits_for_the_writer(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    store = await open_store(f"sqlite:///{tmp_path / 'beside.db'}")
    assert isinstance(store, SqliteStore)
    await store.limits.put_limit(FlowRule("ns", "a", concurrency=1), NOW)
    async with thread_held(store):
        with budgets.within(QUICK):
            assert [r.pattern for r in await store.limits.list_rules("ns")] == ["a"]
        # Outside a request, a read takes its turn on the connection thread.
        waiting = asyncio.ensure_future(store.limits.list_rules("ns"))
        await asyncio.sleep(QUICK.connection_wait * 2)  # timed: it outlasts the budget's wait
        assert not waiting.done()
    assert [r.pattern for r in await waiting] == ["a"]
    with budgets.within(QUICK):  # a read that writes runs where writes run, in full
        await store.ensure_namespace("made", NOW)
        assert await store.namespace_exists("made")


async def test_sqlite_a_write_that_cannot_start_in_time_is_busy(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    store = await open_store(f"sqlite:///{tmp_path / 'writes.db'}")
    assert isinstance(store, SqliteStore)
    rule = FlowRule("ns", "a", concurrency=1)
    async with thread_held(store):
        with budgets.within(QUICK), pytest.raises(StoreBusy) as busy:
            await store.limits.put_limit(rule, NOW)
        assert "connection_wait" in busy.value.message
        waiting = asyncio.ensure_future(store.limits.put_limit(rule, NOW))  # no budget: waits
        await asyncio.sleep(QUICK.connection_wait * 2)  # timed: it outlasts the budget's wait
        assert not waiting.done()
    await waiting
    assert [r.pattern for r in await store.limits.list_rules("ns")] == ["a"]


async def test_sqlite_a_read_past_the_statement_timeout_is_interrupted(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    store = await open_store(f"sqlite:///{tmp_path / 'slow.db'}")
    assert isinstance(store, SqliteStore)

    def endless(conn: sqlite3.Connection) -> int:
        query = (
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT max(i) FROM n"
        )
        return int(conn.execute(query).fetchone()[0])

    with budgets.within(QUICK), pytest.raises(StoreBusy) as busy:
        await store._db.read(endless)
    assert "statement_timeout" in busy.value.message
    with budgets.within(QUICK):
        await store.limits.put_limit(FlowRule("ns", "a", concurrency=1), NOW)
        assert [r.pattern for r in await store.limits.list_rules("ns")] == ["a"]


async def test_sqlite_python_work_past_the_statement_timeout_is_ended(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    """A reader busy in Python (decoding or matching rows) holds its connection as surely as a
    statement does: its loops over rows end at the same budget, and the reader is free again."""
    store = await open_store(f"sqlite:///{tmp_path / 'python.db'}")
    assert isinstance(store, SqliteStore)

    def endless(conn: sqlite3.Connection) -> int:
        rows = conn.execute("SELECT 1").fetchall()
        for n in checked(itertools.count()):  # matching rows that never run out
            rows.append((n,))
        return len(rows)

    with budgets.within(QUICK), pytest.raises(StoreBusy) as busy:
        await store._db.read(endless)
    assert "statement_timeout" in busy.value.message

    def counted(conn: sqlite3.Connection) -> int:
        return sum(1 for _ in checked(range(10_000)))

    assert await store._db.read(counted) == 10_000  # no request, no deadline
    with budgets.within(QUICK):
        assert await store._db.read(counted) == 10_000
        await store.limits.put_limit(FlowRule("ns", "a", concurrency=1), NOW)
        assert [s.rule.pattern for s in (await store.limits.status("ns", NOW)).items] == ["a"]


@pytest.fixture
def pg_store_url(pg_url: str) -> str:
    return with_params(pg_url, pool_min="1", pool_max="1")


async def test_postgres_a_request_finding_every_connection_taken_is_busy_at_once(
    open_store: StoreFactory, pg_store_url: str
) -> None:
    store = await open_store(pg_store_url)
    assert isinstance(store, PostgresStore)
    pool = store._db._pool
    assert pool is not None
    taken, release = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        async with pool.connection():
            taken.set()
            await release.wait()

    holding = asyncio.ensure_future(hold())
    await asyncio.wait_for(taken.wait(), WAIT)
    try:
        with budgets.within(QUICK), pytest.raises(StoreBusy) as busy:
            await store.limits.list_rules("ns")
        assert "connection_wait" in busy.value.message
    finally:
        release.set()
        await holding
    with budgets.within(QUICK):
        assert await store.limits.list_rules("ns") == []


async def test_postgres_a_statement_past_the_request_timeout_is_ended(
    open_store: StoreFactory, pg_store_url: str, pg_schema: str
) -> None:
    store = await open_store(pg_store_url)
    assert isinstance(store, PostgresStore)
    await store.limits.put_limit(FlowRule("ns", "a", concurrency=1), NOW)
    async with await psycopg.AsyncConnection.connect(PG_URL) as other:
        async with other.transaction():
            await other.execute(f"LOCK TABLE {pg_schema}.flow_limits IN ACCESS EXCLUSIVE MODE")
            with budgets.within(QUICK), pytest.raises(StoreBusy) as busy:
                await store.limits.list_rules("ns")
            assert "statement_timeout" in busy.value.message
            blocked = asyncio.ensure_future(store.limits.list_rules("ns"))  # no budget: waits
            await asyncio.sleep(QUICK.statement_timeout * 2)  # timed: outlasts the timeout
            assert not blocked.done()
        assert [r.pattern for r in await blocked] == ["a"]

    async def timeout_now(conn: psycopg.AsyncConnection[dict[str, str]]) -> str:
        cursor = await conn.execute("SHOW statement_timeout")
        row = await cursor.fetchone()
        assert row is not None
        return next(iter(row.values()))

    # The one pooled connection went back without the request's timeout.
    assert await store._db.read(timeout_now) == "0"


@pytest.mark.parametrize("key", ["k1", None], ids=["own key", "drawn key"])
async def test_postgres_a_create_past_the_request_timeout_is_ended(
    open_store: StoreFactory, pg_store_url: str, pg_schema: str, key: str | None
) -> None:
    """A create is one round trip (its statements as one implicit transaction): the request's
    timeout goes in that round trip and ends with it."""
    store = await open_store(pg_store_url)
    assert isinstance(store, PostgresStore)
    async with await psycopg.AsyncConnection.connect(PG_URL) as other, other.transaction():
        await other.execute(f"LOCK TABLE {pg_schema}.timers IN ACCESS EXCLUSIVE MODE")
        with budgets.within(QUICK), pytest.raises(StoreBusy) as busy:
            await store.put_timers([new_timer(key)], "update", NOW)
        assert "statement_timeout" in busy.value.message
    if key is not None:
        assert await store.get_timer("ns", key) is None
    with budgets.within(QUICK):
        (made,) = await store.put_timers([new_timer(key)], "update", NOW)
    assert made.action == "created"

    async def settings_now(conn: psycopg.AsyncConnection[dict[str, str]]) -> list[str]:
        shown = []
        for name in ("statement_timeout", "synchronous_commit"):
            cursor = await conn.execute(f"SHOW {name}")
            row = await cursor.fetchone()
            assert row is not None
            shown.append(next(iter(row.values())))
        return shown

    # The one pooled connection went back as it was: no timeout, commits flushed.
    assert await store._db.read(settings_now) == ["0", "on"]
