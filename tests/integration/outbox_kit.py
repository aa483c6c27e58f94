"""What the ``transaction=`` tests share: a PostgreSQL schema of duetime's beside a user schema
of the caller's, and a worker of its own running on a thread, recording what it fires.

The worker's safety re-check is minutes long, so a timer it fires within seconds of the
caller's commit was found through the wake-up that commit sent (NOTIFY on PostgreSQL, the
datagram channel on SQLite), not by polling.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql
from tests.waiting import wait_until

from duetime import AsyncApp, Event

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from storekit import PG_URL, drop_schema, pooled_schema, with_params

NS = "shop"
FIRED = "order.placed"
READY = "worker.ready"
RECHECK = 600
"""The worker's safety re-check, in seconds: far longer than any test waits."""


@dataclass(frozen=True)
class PgOutbox:
    """duetime's schema (``url``) and the caller's own (``user_schema``, with ``orders``)."""

    url: str
    dsn: str
    schema: str
    user_schema: str

    def orders(self) -> list[str]:
        with psycopg.connect(self.dsn) as conn:
            query = sql.SQL("SELECT ref FROM {}.orders ORDER BY ref").format(
                sql.Identifier(self.user_schema)
            )
            return [row[0] for row in conn.execute(query)]

    def timer_keys(self) -> list[str]:
        """Every timer key of the namespace that is visible from another connection."""
        with psycopg.connect(self.dsn) as conn:
            query = sql.SQL("SELECT key FROM {}.timer_keys WHERE namespace = %s ORDER BY key")
            rows = conn.execute(query.format(sql.Identifier(self.schema)), [NS])
            return [row[0] for row in rows]

    def status(self, key: str) -> str | None:
        with psycopg.connect(self.dsn) as conn:
            query = sql.SQL(
                "SELECT t.status FROM {s}.timers t JOIN {s}.timer_keys k ON k.timer_id = t.id"
                " WHERE k.namespace = %s AND k.key = %s"
            ).format(s=sql.Identifier(self.schema))
            row = conn.execute(query, [NS, key]).fetchone()
            return None if row is None else str(row[0])


@pytest.fixture
def pg_outbox() -> Iterator[PgOutbox]:
    with pooled_schema() as schema:  # migrated: it exists before any test connects to it
        user_schema = f"u_{uuid.uuid4().hex[:16]}"
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(user_schema)))
            conn.execute(
                sql.SQL("CREATE TABLE {}.orders (ref text PRIMARY KEY)").format(
                    sql.Identifier(user_schema)
                )
            )
        yield PgOutbox(with_params(PG_URL, schema=schema), PG_URL, schema, user_schema)
        drop_schema(user_schema)


@dataclass(frozen=True)
class Elsewhere:
    """A database beside the app's on the same server, with a duetime schema of the same name
    migrated in it: what a caller holding the wrong connection would write to."""

    dsn: str
    url: str
    schema: str

    def timer_keys(self) -> list[str]:
        with psycopg.connect(self.dsn) as conn:
            query = sql.SQL("SELECT key FROM {}.timer_keys ORDER BY key")
            return [row[0] for row in conn.execute(query.format(sql.Identifier(self.schema)))]


def dsn_of_database(dsn: str, database: str) -> str:
    """``dsn`` with its database replaced."""
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path=f"/{database}"))


@pytest.fixture
def elsewhere(pg_outbox: PgOutbox) -> Iterator[Elsewhere]:
    name = f"other_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(pg_outbox.dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    dsn = dsn_of_database(pg_outbox.dsn, name)
    other = Elsewhere(dsn, with_params(dsn, schema=pg_outbox.schema), pg_outbox.schema)
    try:
        asyncio.run(_migrate(other.url))
        yield other
    finally:
        with psycopg.connect(pg_outbox.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


async def _migrate(url: str) -> None:
    async with AsyncApp(url, NS):
        pass


class WorkerThread:
    """An AsyncApp worker of its own (its own store, its own loop) on a thread."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.fired: list[str] = []
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._failed: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:
            self._failed = exc
            self._ready.set()

    async def _main(self) -> None:
        app = AsyncApp(self.url, NS, recheck=timedelta(seconds=RECHECK))

        ready = asyncio.Event()

        @app.handler(FIRED)
        async def placed(event: Event) -> None:
            self.fired.append(event.key)

        @app.handler(READY)
        async def started(event: Event) -> None:
            ready.set()

        async with app:
            worker = app.worker(materialize=False, maintain=False)
            task = asyncio.create_task(worker.run())
            self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
            # Once it has fired a timer of its own, it is running and listening.
            await app.schedule(READY, delay=0)
            await ready.wait()
            self._ready.set()
            await self._stop.wait()
            worker.stop()
            await task

    def __enter__(self) -> WorkerThread:
        self._thread.start()
        assert self._ready.wait(30), "the worker did not start"
        if self._failed is not None:
            raise AssertionError("the worker failed") from self._failed
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None
        assert self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)

    def wait_fired(self, key: str) -> None:
        wait_until(lambda: key in self.fired, 20, f"the worker to fire {key!r}")
