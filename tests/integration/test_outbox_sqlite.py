"""``transaction=`` with a ``sqlite3.Connection`` on the app's own SQLite file.

The timer is written through the caller's connection, inside its transaction: visible to
others once it commits (and then fired on time by a running worker of another store, woken by
the commit, though its safety re-check is minutes away), gone when it rolls back.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import psycopg
import pytest
from outbox_kit import FIRED, NS, WorkerThread
from storekit import require_pg
from tests.waiting import until

from duetime import AlreadyExists, App, AsyncApp, InvalidInput, TimerRequest


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "shop.db"
    with App(f"sqlite:///{path}", NS):  # the file and its schema, before the caller connects
        pass
    return path


def url(db: Path) -> str:
    return f"sqlite:///{db}"


def keys(db: Path) -> set[str]:
    """Every timer key visible from another connection."""
    with sqlite3.connect(db) as conn:
        return {row[0] for row in conn.execute("SELECT key FROM timers WHERE namespace = ?", [NS])}


def status(db: Path, key: str) -> str:
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT status FROM timers WHERE key = ?", [key]).fetchone()
    return str(row[0])


def watching_commits() -> bool:
    """Whether the store's thread that announces timers once callers commit is running."""
    return any(t.name == "duetime-sqlite-outbox" for t in threading.enumerate())


def with_orders(db: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE IF NOT EXISTS orders (ref TEXT PRIMARY KEY)")
    conn.commit()
    return conn


def test_commit_fires_on_time_and_rollback_leaves_nothing(db: Path) -> None:
    with WorkerThread(url(db)) as worker, App(url(db), NS) as app:
        conn = with_orders(db)
        try:
            conn.execute("INSERT INTO orders VALUES ('q1')")
            result = app.schedule(FIRED, {"order": "q1"}, key="q1", delay=0, transaction=conn)
            assert result.action == "created"
            # Due, but not committed: another connection does not see it, and no worker can
            # claim it (a claim takes the write lock the caller's transaction holds).
            assert "q1" not in keys(db)
            assert "q1" not in worker.fired
            conn.commit()
            worker.wait_fired("q1")  # woken by the commit, not by the re-check
            conn.execute("INSERT INTO orders VALUES ('q2')")
            app.schedule(FIRED, key="q2", delay=0, transaction=conn)
            app.emit(FIRED, key="q2-event", transaction=conn)
            conn.rollback()
            assert conn.isolation_level == ""  # the caller's mode, as it was
            rows = conn.execute("SELECT ref FROM orders").fetchall()
        finally:
            conn.close()
        worker.wait_fired(app.emit(FIRED, key="after").timer.key)  # later work still flows
    assert rows == [("q1",)]
    assert not {"q2", "q2-event"} & keys(db)
    assert "q2" not in worker.fired


def test_cancel_and_emit_join_the_transaction(db: Path) -> None:
    with WorkerThread(url(db)) as worker, App(url(db), NS) as app:
        app.schedule(FIRED, key="later", delay=3600)
        with sqlite3.connect(db) as conn:  # commits on a clean exit
            app.cancel("later", transaction=conn)
            app.emit(FIRED, {"n": 1}, key="event", transaction=conn)
            conn.rollback()
            assert status(db, "later") == "scheduled"
            cancelled = app.cancel("later", transaction=conn)
            assert cancelled.status.value == "cancelled"
            app.emit(FIRED, {"n": 2}, key="event", transaction=conn)
            assert status(db, "later") == "scheduled"  # not before the commit
        conn.close()
        worker.wait_fired("event")
    assert status(db, "later") == "cancelled"


def test_async_app_takes_a_sqlite3_connection(db: Path) -> None:
    async def main() -> None:
        async with AsyncApp(url(db), NS) as app:
            conn = sqlite3.connect(db)
            try:
                await app.schedule(FIRED, key="a1", delay=0, transaction=conn)
                # The commit comes while the store watches for the transaction to end.
                await until(watching_commits, 30, "the store to watch the caller's transaction")
                conn.commit()
                await app.schedule(FIRED, key="a2", delay=0, transaction=conn)
                conn.rollback()
            finally:
                conn.close()

    with WorkerThread(url(db)) as worker:
        asyncio.run(main())
        worker.wait_fired("a1")
    assert "a2" not in keys(db)


def test_a_batch_refused_half_way_leaves_the_callers_transaction_as_it_was(db: Path) -> None:
    with App(url(db), NS) as app:
        app.schedule(FIRED, key="taken", delay=3600)
        conn = sqlite3.connect(db)
        try:
            app.schedule(FIRED, key="mine", delay=3600, transaction=conn)
            batch = [TimerRequest(FIRED, delay=60, key=k) for k in ("b1", "b2", "taken")]
            with pytest.raises(AlreadyExists):
                app.timers.schedule_many(batch, on_conflict="error", transaction=conn)
            assert conn.in_transaction
            conn.commit()
        finally:
            conn.close()
    assert {"mine", "taken"} <= keys(db)
    assert not {"b1", "b2"} & keys(db)


def test_autocommit_without_a_transaction_is_refused_and_begin_is_joined(db: Path) -> None:
    with App(url(db), NS) as app:
        conn = sqlite3.connect(db, isolation_level=None)
        try:
            with pytest.raises(InvalidInput, match="autocommit") as info:
                app.schedule(FIRED, key="auto", delay=0, transaction=conn)
            assert info.value.field == "transaction"
            conn.execute("BEGIN")
            app.schedule(FIRED, key="begun", delay=3600, transaction=conn)
            assert "begun" not in keys(db)
            conn.execute("COMMIT")
        finally:
            conn.close()
    assert "begun" in keys(db)
    assert "auto" not in keys(db)


def test_another_file_or_memory_is_refused(db: Path, tmp_path: Path) -> None:
    with App(url(db), NS) as app:
        for conn in (sqlite3.connect(tmp_path / "other.db"), sqlite3.connect(":memory:")):
            try:
                with pytest.raises(InvalidInput, match="app's") as info:
                    app.schedule(FIRED, key="k", delay=0, transaction=conn)
                assert info.value.field == "transaction"
            finally:
                conn.close()
    assert "k" not in keys(db)


def test_anything_but_a_sqlite3_connection_is_refused(db: Path) -> None:
    with App(url(db), NS) as app:
        for wrong in ("not a connection", object()):
            with pytest.raises(InvalidInput, match=r"sqlite3\.Connection") as info:
                app.schedule(FIRED, key="k", delay=0, transaction=wrong)
            assert info.value.field == "transaction"
    assert "k" not in keys(db)


def test_a_postgres_connection_is_refused(db: Path) -> None:
    with psycopg.connect(require_pg()) as pg, App(url(db), NS) as app:
        with pytest.raises(InvalidInput, match="SQLite") as info:
            app.schedule(FIRED, key="k", delay=0, transaction=pg)
        assert info.value.field == "transaction"
    assert "k" not in keys(db)


def test_a_closed_or_read_only_connection_is_refused(db: Path) -> None:
    closed = sqlite3.connect(db)
    closed.close()
    read_only = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    query_only = sqlite3.connect(db)
    query_only.execute("PRAGMA query_only = 1")
    try:
        with App(url(db), NS) as app:
            app.schedule(FIRED, key="later", delay=3600)
            for conn, why in (
                (closed, "closed"),
                (read_only, "read-only"),
                (query_only, "read-only"),
            ):
                with pytest.raises(InvalidInput, match=why) as info:
                    app.schedule(FIRED, key="k", delay=0, transaction=conn)
                assert info.value.field == "transaction"
                with pytest.raises(InvalidInput, match=why) as info:
                    app.cancel("later", transaction=conn)
                assert info.value.field == "transaction"
            read_only.execute("SELECT count(*) FROM timers")  # its transaction carries on
            read_only.rollback()
    finally:
        read_only.close()
        query_only.close()
    assert "k" not in keys(db)
    assert status(db, "later") == "scheduled"
