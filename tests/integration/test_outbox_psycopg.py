"""``transaction=`` with psycopg 3 connections, blocking and async, on a real PostgreSQL.

Each kind: what is scheduled in the caller's transaction is visible (and fired by a running
worker, woken by the commit) once it commits, and gone when it rolls back; cancel and emit join
the transaction the same way; the caller's search_path and isolation level stay as they were.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid

import asyncpg
import psycopg
import pytest
from outbox_kit import (
    FIRED,
    NS,
    Elsewhere,
    PgOutbox,
    WorkerThread,
    dsn_of_database,
    elsewhere,
    pg_outbox,
)
from pg_cluster import PgCluster, cluster_problem
from psycopg import IsolationLevel, sql

from duetime import App, AsyncApp, InvalidInput, NotFound

__all__ = ["elsewhere", "pg_outbox"]


class Failed(Exception):
    """The caller's own work failed: its transaction rolls back."""


def _insert_order(conn: psycopg.Connection, ref: str) -> None:
    conn.execute("INSERT INTO orders (ref) VALUES (%s)", [ref])


def _session_state(conn: psycopg.Connection) -> tuple[str, str]:
    path = conn.execute("SELECT current_setting('search_path')").fetchone()
    level = conn.execute("SELECT current_setting('transaction_isolation')").fetchone()
    assert path is not None
    assert level is not None
    return str(path[0]), str(level[0])


def test_blocking_connection_commits_fires_and_rolls_back(pg_outbox: PgOutbox) -> None:
    user_path = f"{pg_outbox.user_schema}, public"
    with (
        WorkerThread(pg_outbox.url) as worker,
        App(pg_outbox.url, NS) as app,
        psycopg.connect(pg_outbox.dsn, autocommit=True) as conn,
    ):
        conn.execute(
            sql.SQL("SET search_path = {}, public").format(sql.Identifier(pg_outbox.user_schema))
        )
        conn.isolation_level = IsolationLevel.SERIALIZABLE
        with conn.transaction():
            _insert_order(conn, "o1")
            result = app.schedule(FIRED, {"order": "o1"}, key="o1", delay=0, transaction=conn)
            assert result.action == "created"
            # The caller's session is as it was, in the transaction and after it.
            assert _session_state(conn) == (user_path, "serializable")
            assert "o1" not in pg_outbox.timer_keys()  # not before the commit
        assert "o1" in pg_outbox.timer_keys()
        worker.wait_fired("o1")
        with contextlib.suppress(Failed), conn.transaction():
            _insert_order(conn, "o2")
            app.schedule(FIRED, key="o2", delay=0, transaction=conn)
            app.emit(FIRED, key="o2-event", transaction=conn)
            raise Failed
        assert _session_state(conn)[0] == user_path
    assert pg_outbox.orders() == ["o1"]
    assert "o2" not in pg_outbox.timer_keys()
    assert "o2-event" not in pg_outbox.timer_keys()
    assert "o2" not in worker.fired


def test_blocking_connection_that_has_not_begun_begins_with_its_own_settings(
    pg_outbox: PgOutbox,
) -> None:
    with App(pg_outbox.url, NS) as app, psycopg.connect(pg_outbox.dsn) as conn:
        conn.isolation_level = IsolationLevel.REPEATABLE_READ
        app.schedule(FIRED, key="fresh", delay=60, transaction=conn)  # duetime's is the first
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        assert _session_state(conn)[1] == "repeatable read"
        assert "fresh" not in pg_outbox.timer_keys()
        conn.commit()
        assert "fresh" in pg_outbox.timer_keys()
        app.emit(FIRED, key="dropped", transaction=conn)
        conn.rollback()
    assert "dropped" not in pg_outbox.timer_keys()


def test_blocking_cancel_and_emit_join_the_transaction(pg_outbox: PgOutbox) -> None:
    with (
        WorkerThread(pg_outbox.url) as worker,
        App(pg_outbox.url, NS) as app,
        psycopg.connect(pg_outbox.dsn) as conn,
    ):
        app.schedule(FIRED, key="later", delay=3600)
        with pytest.raises(NotFound):
            app.cancel("missing", transaction=conn)  # refused: the transaction carries on
        app.cancel("later", transaction=conn)
        conn.rollback()
        assert pg_outbox.status("later") == "scheduled"
        app.cancel("later", transaction=conn)
        assert pg_outbox.status("later") == "scheduled"  # not before the commit
        conn.commit()
        assert pg_outbox.status("later") == "cancelled"
        app.emit(FIRED, {"n": 1}, key="event", transaction=conn)
        conn.commit()
        worker.wait_fired("event")


def test_async_connection_commits_fires_and_rolls_back(pg_outbox: PgOutbox) -> None:
    async def main() -> None:
        async with (
            AsyncApp(pg_outbox.url, NS) as app,
            await psycopg.AsyncConnection.connect(pg_outbox.dsn, autocommit=True) as conn,
        ):
            await conn.execute(
                sql.SQL("SET search_path = {}, public").format(
                    sql.Identifier(pg_outbox.user_schema)
                )
            )
            await conn.set_isolation_level(IsolationLevel.SERIALIZABLE)
            async with conn.transaction():
                await conn.execute("INSERT INTO orders (ref) VALUES ('a1')")
                await app.schedule(FIRED, key="a1", delay=0, transaction=conn)
                await app.emit(FIRED, key="a1-event", transaction=conn)
                cur = await conn.execute(
                    "SELECT current_setting('search_path'),"
                    " current_setting('transaction_isolation')"
                )
                assert await cur.fetchone() == (f"{pg_outbox.user_schema}, public", "serializable")
            with contextlib.suppress(Failed):
                async with conn.transaction():
                    await app.schedule(FIRED, key="a2", delay=0, transaction=conn)
                    raise Failed
            await app.schedule(FIRED, key="later", delay=3600)
            async with conn.transaction():
                cancelled = await app.cancel("later", transaction=conn)
                assert cancelled.status.value == "cancelled"
                assert pg_outbox.status("later") == "scheduled"
            assert pg_outbox.status("later") == "cancelled"
            # A connection that has not begun a transaction (autocommit off) begins one.
            async with await psycopg.AsyncConnection.connect(pg_outbox.dsn) as fresh:
                await app.schedule(FIRED, key="a3", delay=60, transaction=fresh)
                assert "a3" not in pg_outbox.timer_keys()
                await fresh.commit()

    with WorkerThread(pg_outbox.url) as worker:
        asyncio.run(main())
        worker.wait_fired("a1")
        worker.wait_fired("a1-event")
    assert {"a1", "a1-event", "a3"} <= set(pg_outbox.timer_keys())
    assert "a2" not in pg_outbox.timer_keys()
    assert pg_outbox.orders() == ["a1"]


def test_autocommit_connection_without_a_transaction_is_refused(pg_outbox: PgOutbox) -> None:
    with App(pg_outbox.url, NS) as app, psycopg.connect(pg_outbox.dsn, autocommit=True) as conn:
        with pytest.raises(InvalidInput, match="autocommit") as info:
            app.schedule(FIRED, key="k", delay=0, transaction=conn)
        assert info.value.field == "transaction"
    assert "k" not in pg_outbox.timer_keys()


def test_a_failed_transaction_is_refused(pg_outbox: PgOutbox) -> None:
    with App(pg_outbox.url, NS) as app, psycopg.connect(pg_outbox.dsn) as conn:
        with pytest.raises(psycopg.errors.DivisionByZero):
            conn.execute("SELECT 1 / 0")
        with pytest.raises(InvalidInput, match="roll it back") as info:
            app.schedule(FIRED, key="k", delay=0, transaction=conn)
        assert info.value.field == "transaction"


def test_blocking_and_async_connections_go_to_their_own_app(pg_outbox: PgOutbox) -> None:
    async def main() -> None:
        async with (
            AsyncApp(pg_outbox.url, NS) as app,
            await psycopg.AsyncConnection.connect(pg_outbox.dsn) as async_conn,
        ):
            with pytest.raises(InvalidInput, match=r"duetime\.App") as info:
                await app.schedule(FIRED, key="k", delay=0, transaction=blocking_conn)
            assert info.value.field == "transaction"
            with App(pg_outbox.url, NS) as blocking_app:
                with pytest.raises(InvalidInput, match="AsyncApp") as info:
                    blocking_app.schedule(FIRED, key="k", delay=0, transaction=async_conn)
                assert info.value.field == "transaction"

    with psycopg.connect(pg_outbox.dsn) as blocking_conn:
        asyncio.run(main())
    assert "k" not in pg_outbox.timer_keys()


def test_asyncpg_is_refused_by_name(pg_outbox: PgOutbox) -> None:
    async def main() -> None:
        conn = await asyncpg.connect(pg_outbox.dsn)
        try:
            async with AsyncApp(pg_outbox.url, NS) as app, conn.transaction():
                with pytest.raises(InvalidInput, match="asyncpg") as info:
                    await app.schedule(FIRED, key="k", delay=0, transaction=conn)
                assert info.value.field == "transaction"
        finally:
            await conn.close()

    asyncio.run(main())


@pytest.mark.parametrize("wrong", ["not a connection", 42, object()])
def test_anything_else_is_refused_naming_transaction(pg_outbox: PgOutbox, wrong: object) -> None:
    with App(pg_outbox.url, NS) as app:
        with pytest.raises(InvalidInput, match="psycopg Connection") as info:
            app.schedule(FIRED, key="k", delay=0, transaction=wrong)
        assert info.value.field == "transaction"
        with pytest.raises(InvalidInput) as info:
            app.cancel("k", transaction=wrong)
        assert info.value.field == "transaction"


def _refused(error: pytest.ExceptionInfo[InvalidInput], *words: str) -> None:
    assert error.value.field == "transaction"
    for word in words:
        assert word in error.value.message, error.value.message


def test_a_connection_to_another_database_is_refused(
    pg_outbox: PgOutbox, elsewhere: Elsewhere
) -> None:
    # One database has a duetime schema of the app's name (another deployment's), the other
    # none: before duetime looked, the first took the timer ("created") and the second failed
    # with a raw driver error.
    others = [elsewhere.dsn, dsn_of_database(pg_outbox.dsn, "postgres")]
    with App(pg_outbox.url, NS) as app:
        app.schedule(FIRED, key="later", delay=3600)
        for dsn in others:
            with psycopg.connect(dsn) as conn:
                with pytest.raises(InvalidInput) as error:
                    app.schedule(FIRED, key="lost", delay=0, transaction=conn)
                _refused(error, "not this app's database", pg_outbox.dsn.rsplit("/", 1)[1])
                with pytest.raises(InvalidInput) as error:
                    app.cancel("later", transaction=conn)
                _refused(error, "not this app's database")
                conn.execute("SELECT 1")  # the caller's transaction carries on
                conn.commit()

    async def main() -> None:
        async with AsyncApp(pg_outbox.url, NS) as app:
            for dsn in others:
                async with await psycopg.AsyncConnection.connect(dsn) as conn:
                    with pytest.raises(InvalidInput) as error:
                        await app.schedule(FIRED, key="lost-async", delay=0, transaction=conn)
                    _refused(error, "not this app's database")

    asyncio.run(main())
    assert elsewhere.timer_keys() == []
    assert not {"lost", "lost-async"} & set(pg_outbox.timer_keys())
    assert pg_outbox.status("later") == "scheduled"


def test_a_connection_to_another_server_is_refused(pg_outbox: PgOutbox) -> None:
    """A server of its own with a database and a duetime schema named as the app's."""
    problem = cluster_problem()
    if problem is not None:
        pytest.skip(problem)
    cluster = PgCluster.create()
    try:
        cluster.start()
        database = pg_outbox.dsn.rsplit("/", 1)[1]
        with psycopg.connect(cluster.url(), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
        dsn = dsn_of_database(cluster.url(), database)
        asyncio.run(_open(f"{dsn}?schema={pg_outbox.schema}"))
        with App(pg_outbox.url, NS) as app, psycopg.connect(dsn) as conn:
            with pytest.raises(InvalidInput) as error:
                app.schedule(FIRED, key="lost", delay=0, transaction=conn)
            _refused(error, "another PostgreSQL server")
            count = conn.execute(
                sql.SQL("SELECT count(*) FROM {}.timer_keys").format(
                    sql.Identifier(pg_outbox.schema)
                )
            ).fetchone()
            assert count == (0,)
    finally:
        cluster.remove()


async def _open(url: str) -> None:
    async with AsyncApp(url, NS):
        pass


def test_a_read_only_transaction_is_refused(pg_outbox: PgOutbox) -> None:
    with App(pg_outbox.url, NS) as app, psycopg.connect(pg_outbox.dsn) as conn:
        conn.read_only = True
        with pytest.raises(InvalidInput) as error:
            app.schedule(FIRED, key="ro", delay=0, transaction=conn)
        _refused(error, "read-only")
        conn.rollback()
        conn.read_only = None
        conn.execute("SET default_transaction_read_only = on")
        conn.commit()
        with pytest.raises(InvalidInput) as error:
            app.emit(FIRED, key="ro-default", transaction=conn)
        _refused(error, "read-only")
        conn.rollback()

    async def main() -> None:
        async with (
            AsyncApp(pg_outbox.url, NS) as app,
            await psycopg.AsyncConnection.connect(pg_outbox.dsn, autocommit=True) as conn,
            conn.transaction(),
        ):
            await conn.execute("SET TRANSACTION READ ONLY")
            with pytest.raises(InvalidInput) as error:
                await app.schedule(FIRED, key="ro-async", delay=0, transaction=conn)
            _refused(error, "read-only")

    asyncio.run(main())
    assert not {"ro", "ro-default", "ro-async"} & set(pg_outbox.timer_keys())


def test_a_role_that_may_not_write_the_schema_is_refused(pg_outbox: PgOutbox) -> None:
    role = f"r_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_outbox.dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    try:
        dsn = pg_outbox.dsn.replace("postgresql://postgres@", f"postgresql://{role}@", 1)
        assert role in dsn
        with App(pg_outbox.url, NS) as app, psycopg.connect(dsn) as conn:
            with pytest.raises(InvalidInput) as error:
                app.schedule(FIRED, key="denied", delay=0, transaction=conn)
            _refused(error, "may not write", pg_outbox.schema)
    finally:
        with psycopg.connect(pg_outbox.dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_a_closed_connection_is_refused(pg_outbox: PgOutbox) -> None:
    conn = psycopg.connect(pg_outbox.dsn)
    conn.close()
    with App(pg_outbox.url, NS) as app:
        with pytest.raises(InvalidInput) as error:
            app.schedule(FIRED, key="closed", delay=0, transaction=conn)
        _refused(error, "closed")


def test_the_callers_search_path_and_temporary_tables_never_take_the_timers(
    pg_outbox: PgOutbox,
) -> None:
    # The caller's session looks at a temporary copy of duetime's key table (which PostgreSQL
    # searches before any schema unless told otherwise) and at its own schema.
    with App(pg_outbox.url, NS) as app, psycopg.connect(pg_outbox.dsn) as conn:
        conn.execute(
            sql.SQL("CREATE TEMPORARY TABLE timer_keys (LIKE {}.timer_keys INCLUDING ALL)").format(
                sql.Identifier(pg_outbox.schema)
            )
        )
        conn.execute(sql.SQL("SET search_path = {}").format(sql.Identifier(pg_outbox.user_schema)))
        conn.commit()
        assert app.schedule(FIRED, key="mine", delay=3600, transaction=conn).action == "created"
        conn.commit()
        assert conn.execute("SELECT count(*) FROM pg_temp.timer_keys").fetchone() == (0,)
    assert "mine" in pg_outbox.timer_keys()
