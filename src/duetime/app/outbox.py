"""``transaction=``: whatever connection or session the caller holds, turned into the driver
connection the store writes through (the transactional outbox).

Users hold a psycopg connection, a SQLAlchemy ``Connection``/``Session`` (or their async kinds),
Django's ``connection``, or a ``sqlite3.Connection``; the store needs the driver connection
underneath — psycopg 3 on PostgreSQL, ``sqlite3`` on SQLite. Wrappers are recognised by the
classes of packages already imported (an object of theirs means they are), so SQLAlchemy and
Django are never imported here — duetime itself needs neither — and subclasses of theirs (a
session class of the application's, a Django backend on top of psycopg's) are recognised too.
A wrapper that has not begun its transaction yet is made to begin it, so what duetime writes
commits or rolls back with the caller's own work.

The blocking :class:`duetime.App` takes blocking connections, :class:`duetime.AsyncApp` async
ones (a ``sqlite3.Connection`` suits both): the caller's connection is only ever used in the
caller's own thread, never from duetime's event loop thread.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from duetime.errors import InvalidInput

R = TypeVar("R")
FIELD = "transaction"
ACCEPTED = (
    "a psycopg Connection or AsyncConnection, a SQLAlchemy Connection or Session (AsyncConnection"
    " or AsyncSession with AsyncApp), Django's connection, or a sqlite3.Connection"
)
REFUSED_DRIVERS = {
    "asyncpg": "asyncpg speaks its own protocol, not psycopg's: use the psycopg driver "
    "(postgresql+psycopg://) for the connection you schedule in",
    "psycopg2": "psycopg2 is not psycopg 3: use psycopg 3 (postgresql+psycopg:// in SQLAlchemy; "
    "Django 4.2+ picks psycopg 3 when it is installed)",
    "aiosqlite": "aiosqlite runs its sqlite3 connection on a thread of its own: pass a "
    "sqlite3.Connection, with the blocking duetime.App",
}


@dataclass(frozen=True, slots=True)
class Held:
    """The driver connection of a caller's transaction, and what the caller passed."""

    connection: Any
    """A ``psycopg.Connection``, ``psycopg.AsyncConnection`` or ``sqlite3.Connection``."""
    passed: str
    """What the caller gave, for errors: ``SQLAlchemy Session``, ``Django connection``…"""


def held_blocking(transaction: object) -> Held:
    """The driver connection behind ``transaction`` for the blocking App (its thread's own)."""
    if isinstance(transaction, Held):
        return transaction
    if _is_sqlalchemy(transaction):
        return _sqlalchemy_blocking(transaction)
    if _is_django(transaction):
        return _django(transaction)
    held = Held(transaction, _kind(transaction))
    _check_driver(held, asynchronous=False)
    return held


async def held_async(transaction: object) -> Held:
    """The driver connection behind ``transaction`` for AsyncApp."""
    if isinstance(transaction, Held):
        return transaction
    if _is_sqlalchemy(transaction):
        return await _sqlalchemy_async(transaction)
    if _is_django(transaction):
        raise InvalidInput(
            FIELD,
            "Django's connection is blocking: schedule in it with duetime.App (from async code, "
            "inside sync_to_async), not AsyncApp",
        )
    held = Held(transaction, _kind(transaction))
    _check_driver(held, asynchronous=True)
    return held


def _check_driver(held: Held, *, asynchronous: bool) -> None:
    """InvalidInput unless ``held.connection`` is a driver connection this App can use."""
    connection = held.connection
    if isinstance(connection, sqlite3.Connection):
        return
    top = _top_module(connection)
    if top in REFUSED_DRIVERS:
        raise InvalidInput(
            FIELD,
            f"{held.passed} runs on the {top} driver, which duetime cannot join: "
            f"{REFUSED_DRIVERS[top]}",
        )
    psycopg = sys.modules.get("psycopg")
    if psycopg is not None:
        if isinstance(connection, psycopg.AsyncConnection):
            if asynchronous:
                return
            raise InvalidInput(
                FIELD,
                f"{held.passed} is async: schedule in it with AsyncApp (await app.schedule), or "
                "pass a blocking psycopg Connection to duetime.App",
            )
        if isinstance(connection, psycopg.Connection):
            if not asynchronous:
                return
            raise InvalidInput(
                FIELD,
                f"{held.passed} is blocking: schedule in it with duetime.App, or pass an "
                "async one (psycopg AsyncConnection, SQLAlchemy AsyncSession) to AsyncApp",
            )
    raise InvalidInput(FIELD, f"expected {ACCEPTED}; got {held.passed}")


# -- SQLAlchemy -----------------------------------------------------------------------------
def _sqlalchemy_blocking(transaction: object) -> Held:
    from sqlalchemy.orm import Session

    passed, given = _sqlalchemy_kind(transaction, asynchronous=False)
    connection = given.connection() if isinstance(given, Session) else given  # a session begins
    held = Held(connection.connection.driver_connection, passed)
    _check_driver(held, asynchronous=False)
    if not connection.in_transaction():
        connection.begin()  # as its first statement would: the caller's commit() ends it
    return held


async def _sqlalchemy_async(transaction: object) -> Held:
    from sqlalchemy.ext.asyncio import AsyncSession

    passed, given = _sqlalchemy_kind(transaction, asynchronous=True)
    connection = await given.connection() if isinstance(given, AsyncSession) else given
    raw = await connection.get_raw_connection()
    held = Held(raw.driver_connection, passed)
    _check_driver(held, asynchronous=True)
    if not connection.in_transaction():
        await connection.begin()
    return held


def _sqlalchemy_kind(transaction: object, *, asynchronous: bool) -> tuple[str, Any]:
    """The session or connection behind ``transaction`` (a scoped session's own), if it is of
    the kind this App takes; InvalidInput saying which App takes it otherwise."""
    from sqlalchemy.engine import Connection
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession, async_scoped_session
    from sqlalchemy.orm import Session, scoped_session

    if isinstance(transaction, scoped_session | async_scoped_session):
        transaction = transaction()
    blocking, in_async = (Connection, Session), (AsyncConnection, AsyncSession)
    right, wrong = (in_async, blocking) if asynchronous else (blocking, in_async)
    passed = f"a SQLAlchemy {type(transaction).__name__}"
    if isinstance(transaction, wrong):
        raise InvalidInput(
            FIELD,
            f"{passed} is blocking: schedule in it with duetime.App, or pass an AsyncSession "
            "or AsyncConnection to AsyncApp"
            if asynchronous
            else f"{passed} is async: schedule in it with AsyncApp (await app.schedule), or "
            "pass a Session or Connection to duetime.App",
        )
    if not isinstance(transaction, right):
        raise InvalidInput(FIELD, f"expected {ACCEPTED}; got {_kind(transaction)}")
    return passed, transaction


# -- Django ---------------------------------------------------------------------------------
def _django(transaction: object) -> Held:
    """``django.db.connection`` (or ``connections[alias]``): its psycopg 3 or sqlite3
    connection, inside a ``transaction.atomic()`` block."""
    wrapper: Any = transaction
    if not (hasattr(wrapper, "ensure_connection") and hasattr(wrapper, "get_autocommit")):
        raise InvalidInput(FIELD, f"expected {ACCEPTED}; got {_kind(transaction)}")
    if wrapper.get_autocommit():
        raise InvalidInput(
            FIELD,
            "Django's connection is in autocommit mode: schedule inside a "
            "transaction.atomic() block, so the timers commit or roll back with it",
        )
    if getattr(wrapper, "needs_rollback", False):
        raise InvalidInput(
            FIELD, "Django's atomic block has failed and will roll back: nothing can join it"
        )
    wrapper.ensure_connection()
    held = Held(wrapper.connection, f"Django's {wrapper.vendor} connection")
    _check_driver(held, asynchronous=False)
    return held


# -- recognising ----------------------------------------------------------------------------
def _is_sqlalchemy(value: object) -> bool:
    if "sqlalchemy.orm" not in sys.modules:  # an engine's Connection needs the ORM's package too
        return _top_module(value) == "sqlalchemy"
    from sqlalchemy.engine import Connection
    from sqlalchemy.orm import Session, scoped_session

    kinds: tuple[type, ...] = (Connection, Session, scoped_session)
    if "sqlalchemy.ext.asyncio" in sys.modules:
        from sqlalchemy.ext import asyncio

        kinds += (asyncio.AsyncConnection, asyncio.AsyncSession, asyncio.async_scoped_session)
    return isinstance(value, kinds) or _top_module(value) == "sqlalchemy"


def _is_django(value: object) -> bool:
    if "django.db" not in sys.modules:
        return False
    from django.db.backends.base.base import BaseDatabaseWrapper
    from django.utils.connection import ConnectionProxy

    return isinstance(value, BaseDatabaseWrapper | ConnectionProxy)


# -- naming ---------------------------------------------------------------------------------
def _top_module(value: object) -> str:
    return (type(value).__module__ or "").split(".", 1)[0]


def _kind(value: object) -> str:
    kind = type(value)
    module = kind.__module__
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"


def run_now(coroutine: Coroutine[Any, Any, R]) -> R:
    """Run ``coroutine`` to its end here, in the caller's thread, with no event loop.

    The blocking App's way to write through a caller's blocking connection: the store's outbox
    methods, given one, never wait (each await completes at once), so the caller's connection
    is used only in its own thread.
    """
    try:
        coroutine.send(None)
    except StopIteration as done:
        result: R = done.value
        return result
    coroutine.close()
    raise RuntimeError("a blocking caller's transaction reached code that waits for an event loop")
