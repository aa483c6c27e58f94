"""A SQLAlchemy session inside a transactional handler's transaction (``duetime[sqlalchemy]``).

A transactional handler is called as ``func(event, connection)`` with duetime's own driver
connection, inside the transaction that marks its timer done. These helpers bind a SQLAlchemy
session to that same connection and transaction, so ORM writes commit with the completion,
and roll back with it when the handler raises::

    @app.handler("order.paid", transactional=True)          # PostgreSQL: an async handler
    async def paid(event, connection):
        async with async_session_for(connection) as session:
            session.add(Receipt(order=event.payload["order"]))

    @app.handler("order.paid", transactional=True)          # SQLite: a plain def
    def paid(event, connection):
        with session_for(connection) as session:
            session.add(Receipt(order=event.payload["order"]))

The session works in a savepoint of duetime's transaction: leaving the block commits it there
(``session.commit()`` and ``session.rollback()`` inside it act on the savepoint), and only
duetime ends the transaction itself. SQLAlchemy gets the connection through a stand-in whose
``commit``, ``rollback`` and ``close`` do nothing — SQLAlchemy's pool and its first-connect
set-up call them, and must never end duetime's transaction nor close its pooled connection.
"""

from __future__ import annotations

import contextvars
import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from sqlalchemy import Engine, create_engine
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool

_lent: contextvars.ContextVar[Any] = contextvars.ContextVar("duetime_lent_connection")
"""The connection the engines below hand out: the handler's, for the session being made."""
_engines: dict[str, Any] = {}


class Lent:
    """A driver connection as SQLAlchemy may hold it: it can neither end the transaction nor
    close the connection, nor leave a notice handler behind on it; rows are tuples."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection

    def __getattr__(self, name: str) -> Any:
        return getattr(self._connection, name)

    def cursor(self, *args: Any, **kwargs: Any) -> Any:
        if _is_psycopg(self._connection):
            from psycopg.rows import tuple_row

            kwargs.setdefault("row_factory", tuple_row)  # duetime's pool makes dict rows
        return self._connection.cursor(*args, **kwargs)

    def add_notice_handler(self, handler: Any) -> None:
        pass

    def commit(self) -> None:
        pass

    def rollback(self) -> None:
        pass

    def close(self) -> None:
        pass


class AsyncLent(Lent):
    """:class:`Lent`, for a psycopg ``AsyncConnection``."""

    async def commit(self) -> None:  # type: ignore[override]
        pass

    async def rollback(self) -> None:  # type: ignore[override]
        pass

    async def close(self) -> None:  # type: ignore[override]
        pass


@contextmanager
def session_for(connection: Any, **options: Any) -> Iterator[Session]:
    """A ``Session`` in the transaction of a transactional handler's ``connection`` (SQLite's
    ``sqlite3.Connection``); leaving the block commits the session into that transaction."""
    if not isinstance(connection, sqlite3.Connection):
        raise TypeError(
            f"session_for takes the sqlite3.Connection a SQLite handler gets, not "
            f"{type(connection).__name__}: on PostgreSQL use async_session_for"
        )
    engine: Engine = _engine("sqlite", lambda: create_engine("sqlite://", **_lending()))
    token = _lent.set(Lent(connection))
    try:
        bound = engine.connect()
    finally:
        _lent.reset(token)
    with bound:
        bound.begin()  # SQLAlchemy's view of duetime's transaction: never ended by it
        with Session(bind=bound, join_transaction_mode="create_savepoint", **options) as session:
            yield session
            session.commit()


@asynccontextmanager
async def async_session_for(connection: Any, **options: Any) -> AsyncIterator[AsyncSession]:
    """An ``AsyncSession`` in the transaction of a transactional handler's ``connection``
    (PostgreSQL's psycopg ``AsyncConnection``); leaving the block commits the session into
    that transaction."""
    if not _is_psycopg(connection) or not hasattr(connection, "set_autocommit"):
        raise TypeError(
            f"async_session_for takes the psycopg AsyncConnection a PostgreSQL handler gets, not "
            f"{type(connection).__name__}: on SQLite use session_for"
        )
    engine: AsyncEngine = _engine("psycopg", _async_engine)
    token = _lent.set(AsyncLent(connection))
    try:
        bound = await engine.connect()  # started: the connection is taken now
    finally:
        _lent.reset(token)
    try:
        await bound.begin()
        session = AsyncSession(bind=bound, join_transaction_mode="create_savepoint", **options)
        async with session:
            yield session
            await session.commit()
    finally:
        await bound.close()


def _async_engine() -> AsyncEngine:
    async def lent() -> Any:
        return _lent.get()

    # No hstore look-up: it would register an adapter on duetime's pooled connection.
    return create_async_engine(
        "postgresql+psycopg://", async_creator=lent, poolclass=NullPool, use_native_hstore=False
    )


def _lending() -> dict[str, Any]:
    return {"creator": _lent.get, "poolclass": NullPool}


def _engine(kind: str, make: Any) -> Any:
    """One engine per driver for the process: its dialect is set up once, on the first
    handler's connection (reads only), never again."""
    engine = _engines.get(kind)
    if engine is None:
        engine = _engines[kind] = make()
    return engine


def _is_psycopg(connection: object) -> bool:
    return type(connection).__module__.split(".", 1)[0] == "psycopg"
