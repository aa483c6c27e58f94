"""A caller's blocking psycopg ``Connection`` with the face of an ``AsyncConnection``.

The outbox's writes are async code written once (:meth:`PostgresStore._put` and the
statements of ``queries.sql``); a blocking caller's transaction runs them through this bridge,
whose every ``await`` completes at once, on the caller's own connection, in the caller's own
thread. :func:`run_now` drives such a coroutine there without an event loop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg.rows import RowFactory


class BridgedCursor:
    """A blocking cursor behind an async cursor's methods (the ones the outbox calls)."""

    def __init__(self, cursor: psycopg.Cursor[Any]) -> None:
        self._cursor = cursor

    @property
    def pgresult(self) -> Any:
        return self._cursor.pgresult

    @property
    def description(self) -> Any:
        return self._cursor.description

    async def execute(self, query: Any, params: Any = None) -> BridgedCursor:
        self._cursor.execute(query, params)
        return self

    async def fetchone(self) -> Any:
        return self._cursor.fetchone()

    async def fetchall(self) -> Sequence[Any]:
        return self._cursor.fetchall()

    async def __aenter__(self) -> BridgedCursor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._cursor.close()


class BridgedPipeline:
    def __init__(self, pipeline: psycopg.Pipeline) -> None:
        self._pipeline = pipeline

    async def sync(self) -> None:
        self._pipeline.sync()


class SyncBridge:
    """The subset of ``AsyncConnection`` the outbox uses, on a blocking ``Connection``."""

    def __init__(self, connection: psycopg.Connection[Any]) -> None:
        self.connection = connection

    @property
    def info(self) -> psycopg.ConnectionInfo:
        return self.connection.info

    @property
    def autocommit(self) -> bool:
        return self.connection.autocommit

    def cursor(self, *, row_factory: RowFactory[Any] | None = None, binary: bool = False) -> Any:
        if row_factory is None:
            return BridgedCursor(self.connection.cursor(binary=binary))
        return BridgedCursor(self.connection.cursor(row_factory=row_factory, binary=binary))

    async def execute(self, query: Any, params: Any = None) -> BridgedCursor:
        return BridgedCursor(self.connection.execute(query, params))

    @asynccontextmanager
    async def pipeline(self) -> AsyncIterator[BridgedPipeline]:
        with self.connection.pipeline() as pipeline:
            yield BridgedPipeline(pipeline)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        with self.connection.transaction():
            yield
