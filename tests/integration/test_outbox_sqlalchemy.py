"""``transaction=`` with SQLAlchemy 2 connections and sessions (psycopg driver), on a real
PostgreSQL: ``Connection`` and ``Session`` with the blocking App, ``AsyncConnection`` and
``AsyncSession`` with AsyncApp — each visible on commit, gone on rollback, a session that has
not run a statement yet included. SQLAlchemy on asyncpg is refused, naming the driver.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import ClassVar

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
from sqlalchemy import Engine, String, create_engine, text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine
from sqlalchemy.orm import (
    DeclarativeBase,
    Mapped,
    Session,
    mapped_column,
    scoped_session,
    sessionmaker,
)

from duetime import App, AsyncApp, InvalidInput

__all__ = ["elsewhere", "pg_outbox"]


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "orders"
    __table_args__: ClassVar = {"schema": "user_schema"}  # the test's own (schema_translate_map)

    ref: Mapped[str] = mapped_column(String, primary_key=True)


class AppSession(Session):
    """An application's own session class: recognised as the Session it is."""


class Failed(Exception):
    """The caller's own work failed: its transaction rolls back."""


def _url(pg_outbox: PgOutbox, driver: str) -> str:
    return pg_outbox.dsn.replace("postgresql://", f"postgresql+{driver}://", 1)


@pytest.fixture
def engine(pg_outbox: PgOutbox) -> Iterator[Engine]:
    engine = create_engine(_url(pg_outbox, "psycopg")).execution_options(
        schema_translate_map={"user_schema": pg_outbox.user_schema}
    )
    yield engine
    engine.dispose()


@contextlib.asynccontextmanager
async def _async_engine(pg_outbox: PgOutbox, driver: str = "psycopg") -> AsyncIterator[AsyncEngine]:
    engine = create_async_engine(_url(pg_outbox, driver)).execution_options(
        schema_translate_map={"user_schema": pg_outbox.user_schema}
    )
    try:
        yield engine
    finally:
        await engine.dispose()


def test_connection_commits_fires_and_rolls_back(pg_outbox: PgOutbox, engine: Engine) -> None:
    with WorkerThread(pg_outbox.url) as worker, App(pg_outbox.url, NS) as app:
        with engine.begin() as conn:
            conn.execute(Order.__table__.insert().values(ref="c1"))
            app.schedule(FIRED, {"order": "c1"}, key="c1", delay=0, transaction=conn)
            assert "c1" not in pg_outbox.timer_keys()
        worker.wait_fired("c1")
        with contextlib.suppress(Failed), engine.begin() as conn:
            conn.execute(Order.__table__.insert().values(ref="c2"))
            app.schedule(FIRED, key="c2", delay=0, transaction=conn)
            raise Failed
        # A connection that has begun nothing: duetime's write begins it, as a statement would.
        with engine.connect() as conn:
            app.schedule(FIRED, key="c3", delay=3600, transaction=conn)
            assert conn.in_transaction()
            conn.commit()
            app.emit(FIRED, key="c4-event", transaction=conn)
            conn.rollback()
    assert pg_outbox.orders() == ["c1"]
    keys = set(pg_outbox.timer_keys())
    assert {"c1", "c3"} <= keys
    assert not {"c2", "c4-event"} & keys


def test_session_commits_fires_and_rolls_back(pg_outbox: PgOutbox, engine: Engine) -> None:
    with WorkerThread(pg_outbox.url) as worker, App(pg_outbox.url, NS) as app:
        # A fresh session that has not run a statement yet (of a class of the application's).
        with AppSession(engine) as session:
            app.schedule(FIRED, {"order": "s1"}, key="s1", delay=0, transaction=session)
            session.add(Order(ref="s1"))
            assert "s1" not in pg_outbox.timer_keys()
            session.commit()
        worker.wait_fired("s1")
        with Session(engine) as session:
            session.add(Order(ref="s2"))
            session.flush()
            app.schedule(FIRED, key="s2", delay=0, transaction=session)
            app.emit(FIRED, key="s2-event", transaction=session)
            session.rollback()
        # A scoped session stands for the session it holds.
        scoped = scoped_session(sessionmaker(engine))
        app.schedule(FIRED, key="later", delay=3600)
        app.cancel("later", transaction=scoped)
        assert pg_outbox.status("later") == "scheduled"
        scoped.commit()
        scoped.remove()
    assert pg_outbox.status("later") == "cancelled"
    assert pg_outbox.orders() == ["s1"]
    assert not {"s2", "s2-event"} & set(pg_outbox.timer_keys())


def test_session_state_is_left_as_it_was(pg_outbox: PgOutbox, engine: Engine) -> None:
    serializable = engine.execution_options(isolation_level="SERIALIZABLE")
    with App(pg_outbox.url, NS) as app, Session(serializable) as session:
        session.execute(text(f'SET search_path = "{pg_outbox.user_schema}", public'))
        app.schedule(FIRED, key="state", delay=3600, transaction=session)
        path, level = session.execute(
            text("SELECT current_setting('search_path'), current_setting('transaction_isolation')")
        ).one()
        assert (path, level) == (f"{pg_outbox.user_schema}, public", "serializable")
        session.commit()
    assert "state" in pg_outbox.timer_keys()  # in duetime's schema, not the caller's path


def test_async_connection_commits_and_rolls_back(pg_outbox: PgOutbox) -> None:
    async def main() -> None:
        async with _async_engine(pg_outbox) as engine, AsyncApp(pg_outbox.url, NS) as app:
            async with engine.begin() as conn:
                await conn.execute(Order.__table__.insert().values(ref="ac1"))
                await app.schedule(FIRED, key="ac1", delay=0, transaction=conn)
                assert "ac1" not in pg_outbox.timer_keys()
            with contextlib.suppress(Failed):
                async with engine.begin() as conn:
                    await app.schedule(FIRED, key="ac2", delay=0, transaction=conn)
                    raise Failed
            async with engine.connect() as conn:  # has begun nothing yet
                await app.emit(FIRED, key="ac3-event", transaction=conn)
                await conn.commit()

    with WorkerThread(pg_outbox.url) as worker:
        asyncio.run(main())
        worker.wait_fired("ac1")
        worker.wait_fired("ac3-event")
    assert "ac2" not in pg_outbox.timer_keys()
    assert pg_outbox.orders() == ["ac1"]


def test_async_session_that_has_not_run_a_statement(pg_outbox: PgOutbox) -> None:
    async def main() -> None:
        async with _async_engine(pg_outbox) as engine, AsyncApp(pg_outbox.url, NS) as app:
            async with AsyncSession(engine) as session:
                await app.schedule(FIRED, key="as1", delay=0, transaction=session)
                session.add(Order(ref="as1"))
                assert "as1" not in pg_outbox.timer_keys()
                await session.commit()
            async with AsyncSession(engine) as session:
                session.add(Order(ref="as2"))
                await app.schedule(FIRED, key="as2", delay=0, transaction=session)
                await session.rollback()
            await app.schedule(FIRED, key="later", delay=3600)
            async with AsyncSession(engine) as session:
                await app.cancel("later", transaction=session)
                await session.commit()
            async with AsyncSession(engine) as session:
                await app.emit(FIRED, key="as3-event", transaction=session)
                await session.commit()

    with WorkerThread(pg_outbox.url) as worker:
        asyncio.run(main())
        worker.wait_fired("as1")
        worker.wait_fired("as3-event")
    assert "as2" not in pg_outbox.timer_keys()
    assert pg_outbox.status("later") == "cancelled"
    assert pg_outbox.orders() == ["as1"]


def test_sqlalchemy_on_asyncpg_is_refused_naming_the_driver(pg_outbox: PgOutbox) -> None:
    async def main() -> None:
        async with (
            _async_engine(pg_outbox, "asyncpg") as engine,
            AsyncApp(pg_outbox.url, NS) as app,
            AsyncSession(engine) as session,
        ):
            with pytest.raises(InvalidInput, match="asyncpg driver") as info:
                await app.schedule(FIRED, key="k", delay=0, transaction=session)
            assert info.value.field == "transaction"

    asyncio.run(main())
    assert "k" not in pg_outbox.timer_keys()


def test_blocking_and_async_kinds_go_to_their_own_app(pg_outbox: PgOutbox, engine: Engine) -> None:
    async def main() -> None:
        async with (
            _async_engine(pg_outbox) as async_engine,
            AsyncApp(pg_outbox.url, NS) as app,
            AsyncSession(async_engine) as session,
        ):
            with Session(engine) as blocking:
                with pytest.raises(InvalidInput, match="is blocking") as info:
                    await app.schedule(FIRED, key="k", delay=0, transaction=blocking)
                assert info.value.field == "transaction"
            with App(pg_outbox.url, NS) as blocking_app:
                with pytest.raises(InvalidInput, match="is async") as info:
                    blocking_app.schedule(FIRED, key="k", delay=0, transaction=session)
                assert info.value.field == "transaction"

    asyncio.run(main())
    assert "k" not in pg_outbox.timer_keys()


def test_sessions_on_another_database_are_refused(
    pg_outbox: PgOutbox, elsewhere: Elsewhere
) -> None:
    """A Session on another database with a duetime schema of the app's name; an AsyncSession
    on a database with none; a read-only AsyncConnection on the app's own."""
    other = create_engine(elsewhere.dsn.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with App(pg_outbox.url, NS) as app, Session(other) as session:
            with pytest.raises(InvalidInput, match="not this app's database") as info:
                app.schedule(FIRED, key="lost", delay=0, transaction=session)
            assert info.value.field == "transaction"
            session.commit()
    finally:
        other.dispose()

    async def main() -> None:
        bare = dsn_of_database(pg_outbox.dsn, "postgres")
        engine = create_async_engine(bare.replace("postgresql://", "postgresql+psycopg://", 1))
        try:
            async with AsyncApp(pg_outbox.url, NS) as app, AsyncSession(engine) as session:
                with pytest.raises(InvalidInput, match="not this app's database") as info:
                    await app.schedule(FIRED, key="lost-async", delay=0, transaction=session)
                assert info.value.field == "transaction"
        finally:
            await engine.dispose()
        async with (
            _async_engine(pg_outbox) as engine,
            AsyncApp(pg_outbox.url, NS) as app,
            engine.connect() as conn,
        ):
            await conn.execute(text("SET TRANSACTION READ ONLY"))
            with pytest.raises(InvalidInput, match="read-only") as info:
                await app.schedule(FIRED, key="read-only", delay=0, transaction=conn)
            assert info.value.field == "transaction"

    asyncio.run(main())
    assert elsewhere.timer_keys() == []
    assert not {"lost", "lost-async", "read-only"} & set(pg_outbox.timer_keys())
