"""A caller's blocking psycopg ``Connection`` with the face of an ``AsyncConnection``.

The outbox's writes are async code written once (:func:`.write_pipeline.write_timers` and
the statements of the store's ``.sql`` files); a blocking caller's transaction runs them through
this bridge, whose every ``await`` completes at once, on the caller's own connection, in the
caller's own thread. :func:`run_now` drives such a coroutine there without an event loop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import psycopg
from psycopg.pq import Format
from psycopg.rows import AsyncRowFactory, RowFactory, tuple_row

C = TypeVar("C", psycopg.Cursor[Any], psycopg.AsyncCursor[Any])


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


class Borrowed:
    """What both faces share: the caller's connection, its state, a cursor's format."""

    def __init__(self, connection: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]):
        self.connection = connection

    @property
    def info(self) -> psycopg.ConnectionInfo:
        return self.connection.info

    @property
    def autocommit(self) -> bool:
        return self.connection.autocommit

    @staticmethod
    def formatted(cursor: C, binary: bool) -> C:
        if binary:
            cursor.format = Format.BINARY
        return cursor


class SyncBridge(Borrowed):
    """The subset of ``AsyncConnection`` the outbox uses, on a blocking ``Connection``."""

    connection: psycopg.Connection[Any]

    def cursor(
        self, *, row_factory: RowFactory[Any] | None = None, binary: bool = False
    ) -> BridgedCursor:
        cursor = psycopg.Cursor(self.connection, row_factory=row_factory or tuple_row)
        return BridgedCursor(self.formatted(cursor, binary))

    async def execute(self, query: Any, params: Any = None) -> BridgedCursor:
        return await self.cursor().execute(query, params)

    @asynccontextmanager
    async def pipeline(self) -> AsyncIterator[BridgedPipeline]:
        with self.connection.pipeline() as pipeline:
            yield BridgedPipeline(pipeline)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        with self.connection.transaction():
            yield


class PlainCursors(Borrowed):
    """A caller's ``AsyncConnection``, its cursors psycopg's plain ``AsyncCursor``."""

    connection: psycopg.AsyncConnection[Any]

    def cursor(
        self, *, row_factory: AsyncRowFactory[Any] | None = None, binary: bool = False
    ) -> psycopg.AsyncCursor[Any]:
        cursor = psycopg.AsyncCursor(self.connection, row_factory=row_factory or tuple_row)
        return self.formatted(cursor, binary)

    async def execute(self, query: Any, params: Any = None) -> psycopg.AsyncCursor[Any]:
        return await self.cursor().execute(query, params)

    def pipeline(self) -> Any:
        return self.connection.pipeline()

    def transaction(self) -> Any:
        return self.connection.transaction()
