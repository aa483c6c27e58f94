"""The SQLite store's group commit, seen from the connection: SQLite only.

Writes that queue while the store's connection thread is busy are committed together — one
``BEGIN IMMEDIATE`` … ``COMMIT``, so one fsync — each in its own savepoint, so a write that
fails is undone alone and only its caller hears of it. Each test holds the connection thread,
queues its writes behind it, records every statement the connection runs, then lets go.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from storekit import NOW, StoreFactory

from duetime.store import Store
from duetime.store.sqlite.store import SqliteStore
from duetime.tenancy.auth import TokenInfo

WAIT = 10.0
"""Seconds any one step may take; a write whose caller never hears back fails the test."""

Write = Callable[[sqlite3.Connection], Any]


@pytest.fixture
def store(open_store: StoreFactory, tmp_path: Path, runner: asyncio.Runner) -> SqliteStore:
    """A SQLite store only (this module overrides the conftest's store of every backend)."""

    async def open_one() -> Store:
        return await open_store(f"sqlite:///{tmp_path / 'group.db'}")

    opened = runner.run(open_one())
    assert isinstance(opened, SqliteStore)
    return opened


async def traced(store: SqliteStore) -> list[str]:
    """Every statement the store's connection runs from now on, in order."""
    statements: list[str] = []
    await store._db.read(lambda conn: conn.set_trace_callback(statements.append))
    return statements


@asynccontextmanager
async def connection_held(store: SqliteStore) -> AsyncIterator[None]:
    """Keep the store's connection thread busy until the block ends, so writes queue up."""
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


async def queue_behind(store: SqliteStore, calls: Sequence[asyncio.Future[Any]]) -> None:
    """Let every call queue its write behind the held thread (each does in its first step)."""
    await asyncio.sleep(0)
    assert len(store._db._writes) == len(calls)


def started(statements: list[str], prefix: str) -> list[str]:
    """The statements that start with ``prefix`` (transaction control, not the writes' SQL)."""
    return [s for s in statements if s.startswith(prefix)]


def committed_rows(path: Path, sql: str) -> list[Any]:
    """What another connection (another process, as far as SQLite can tell) sees committed."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return [row[0] for row in conn.execute(sql)]


async def make_probe_table(store: SqliteStore) -> None:
    await store._db.write(lambda conn: conn.execute("CREATE TABLE probe (n INTEGER PRIMARY KEY)"))


def insert(*numbers: int) -> Write:
    def write(conn: sqlite3.Connection) -> int:
        for n in numbers:
            conn.execute("INSERT INTO probe (n) VALUES (?)", (n,))
        return len(numbers)

    return write


def outcomes(calls: Sequence[asyncio.Future[Any]]) -> list[Any]:
    return [call.exception() or call.result() for call in calls]


async def test_concurrent_writes_share_one_transaction_and_answer_after_its_commit(
    store: SqliteStore,
) -> None:
    tokens = store.tokens
    statements = await traced(store)
    async with connection_held(store):
        calls: list[asyncio.Future[Any]] = [
            asyncio.ensure_future(tokens.add_token(f"t{i}", f"hash-{i}", ["ns"], False, NOW))
            for i in range(4)
        ]
        await queue_behind(store, calls)
    first, _ = await asyncio.wait(calls, timeout=WAIT, return_when=asyncio.FIRST_COMPLETED)
    assert first
    # The first caller to hear back finds every write of the group durable already.
    assert committed_rows(store.path, "SELECT name FROM tokens ORDER BY name") == [
        "t0",
        "t1",
        "t2",
        "t3",
    ]
    infos: list[TokenInfo] = await asyncio.wait_for(asyncio.gather(*calls), WAIT)
    assert [info.name for info in infos] == ["t0", "t1", "t2", "t3"]
    assert len({info.id for info in infos}) == 4

    assert started(statements, "BEGIN") == ["BEGIN IMMEDIATE"]
    assert started(statements, "COMMIT") == ["COMMIT"]
    assert started(statements, "SAVEPOINT") == ["SAVEPOINT duetime_write"] * 4
    assert started(statements, "RELEASE") == ["RELEASE duetime_write"] * 4


async def test_a_failing_write_is_rolled_back_alone_and_the_others_commit(
    store: SqliteStore,
) -> None:
    await make_probe_table(store)

    def raises_after_writing(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO probe (n) VALUES (200)")
        raise ValueError("the handler changed its mind")

    writes = [
        insert(1),
        insert(100, 1),  # writes 100, then breaks the key: sqlite3.IntegrityError
        insert(2),
        raises_after_writing,
        insert(3),
    ]
    statements = await traced(store)
    async with connection_held(store):
        calls = [asyncio.ensure_future(store._db.write(w)) for w in writes]
        await queue_behind(store, calls)
    await asyncio.wait(calls, timeout=WAIT)

    results = outcomes(calls)
    assert results[0::2] == [1, 1, 1]
    assert isinstance(results[1], sqlite3.IntegrityError)
    assert isinstance(results[3], ValueError)
    assert committed_rows(store.path, "SELECT n FROM probe ORDER BY n") == [1, 2, 3]
    assert started(statements, "BEGIN") == ["BEGIN IMMEDIATE"]
    assert started(statements, "COMMIT") == ["COMMIT"]
    assert started(statements, "ROLLBACK") == ["ROLLBACK TO duetime_write"] * 2


async def test_when_sqlite_abandons_the_transaction_the_rest_are_run_again_once(
    store: SqliteStore,
) -> None:
    """A write that loses the whole transaction (disk full, I/O error) takes the group's work
    with it: the writes that had succeeded run again in a fresh transaction; the ones that had
    failed already are not run again, and every caller hears back exactly once."""
    await make_probe_table(store)
    runs: dict[str, int] = {}

    def counted(name: str, write: Write) -> Write:
        def run(conn: sqlite3.Connection) -> Any:
            runs[name] = runs.get(name, 0) + 1
            return write(conn)

        return run

    def loses_the_transaction(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO probe (n) VALUES (300)")
        conn.execute("ROLLBACK")  # what SQLite does itself on SQLITE_FULL or SQLITE_IOERR
        raise sqlite3.OperationalError("database or disk is full")

    writes = [
        counted("first", insert(1)),
        counted("duplicate", insert(100, 1)),
        counted("lost", loses_the_transaction),
        counted("last", insert(2)),
    ]
    async with connection_held(store):
        calls = [asyncio.ensure_future(store._db.write(w)) for w in writes]
        await queue_behind(store, calls)
    _, pending = await asyncio.wait(calls, timeout=WAIT)
    assert not pending, "a caller never heard back"

    results = outcomes(calls)
    assert results[0] == 1
    assert isinstance(results[1], sqlite3.IntegrityError)
    assert isinstance(results[2], sqlite3.OperationalError)
    assert results[3] == 1
    assert runs == {"first": 2, "duplicate": 1, "lost": 1, "last": 1}
    assert committed_rows(store.path, "SELECT n FROM probe ORDER BY n") == [1, 2]
    assert await store._db.read(lambda conn: conn.in_transaction) is False
    # and the store still takes writes
    assert await asyncio.wait_for(store._db.write(insert(4)), WAIT) == 1
