"""Helpers shared by the store tests: the test database, a fixed "now", and small waits."""

from __future__ import annotations

import contextlib
import functools
import os
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest
from tests.pg_clients import TOO_MANY, ServerLoad, explain, read_load
from tests.waiting import until

from duetime.model import NewTimer
from duetime.store import Store

if TYPE_CHECKING:
    from schema_pool import SchemaPool

PG_URL = os.environ.get("DUETIME_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
TEST_TIMEOUT = 120.0

StoreFactory = Callable[..., Awaitable[Store]]


FULL_SERVER_WAIT = 60.0
"""How long a test waits for a free connection slot on a full server before it fails: tests
in other processes end and give theirs back."""

_checked: list[str | None] = []  # the lasting answer of _pg_problem, once known
_load: list[ServerLoad] = []  # the server's limit and use, read on the first connection


def _pg_problem() -> str | None:
    """Why PostgreSQL cannot be used for tests (None when it can). A full server ("too many
    clients") is waited for, then reported with its real cause; it is asked again next time."""
    if _checked:
        return _checked[0]
    try:
        import psycopg
    except ImportError as exc:
        _checked.append(f"psycopg is not installed ({exc})")
        return _checked[0]
    deadline = time.monotonic() + FULL_SERVER_WAIT
    while True:
        try:
            with psycopg.connect(PG_URL, connect_timeout=3) as conn:
                _load.append(read_load(conn))
            _checked.append(None)
            return None
        except psycopg.Error as exc:
            if TOO_MANY not in str(exc):
                _checked.append(f"cannot connect to {PG_URL} ({exc})".strip())
                return _checked[0]
            if time.monotonic() > deadline:
                return too_many_clients()
        time.sleep(0.5)


def too_many_clients() -> str:
    """What a "too many clients" refusal of the test server means, and what to do."""
    return explain(PG_URL, _tcp_port(PG_URL), _load[0] if _load else None)


def _tcp_port(url: str) -> int | None:
    from schema_pool import _tcp_port as port

    return port(url)


def require_pg() -> str:
    """The test PostgreSQL URL; skips the test (fails it under CI) when there is none, and
    fails it when the server is full (that is no reason to skip)."""
    problem = _pg_problem()
    if problem is not None:
        if TOO_MANY in problem:
            pytest.fail(problem)
        message = f"PostgreSQL unavailable, set DUETIME_TEST_PG: {problem}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return PG_URL


TEST_POOL_MAX = "4"
"""The most connections a store test's pool holds (beside the worker's lanes), unless the test
says otherwise: several test processes share one server, whose ``max_connections`` must hold
all of theirs; a store test needs a few at most. Worker processes that tests start keep the
product's default: their concurrency is what they test."""


def with_params(url: str, **params: str) -> str:
    """``url`` with the query ``params`` (each replacing one of that name already there)."""
    base, _, query = url.partition("?")
    kept = [part for part in query.split("&") if part and part.split("=")[0] not in params]
    added = [f"{name}={value}" for name, value in params.items()]
    return f"{base}?{'&'.join(kept + added)}"


def bounded(url: str) -> str:
    """``url`` with its store's pool bounded to :data:`TEST_POOL_MAX`, unless it says a size."""
    if "pool_max=" in url:
        return url
    base, _, query = url.partition("?")  # first: some tests read the schema from the end
    return f"{base}?pool_max={TEST_POOL_MAX}{'&' if query else ''}{query}"


@functools.cache
def pg_schema_pool() -> SchemaPool:
    """This process's migrated schemas, reused by its tests one after another (made on first
    use: psycopg may be missing, see ``require_pg``)."""
    from schema_pool import SchemaPool

    return SchemaPool(PG_URL)


def settle_schema_pool() -> None:
    """A test has ended: its pooled schemas go back to the pool, or are dropped."""
    if pg_schema_pool.cache_info().currsize:
        pg_schema_pool().settle()


def close_schema_pool() -> None:
    """Drop the schemas of this process's pool, if it made one (the test session is ending)."""
    if pg_schema_pool.cache_info().currsize:
        pg_schema_pool().close()


@contextlib.contextmanager
def pooled_schema() -> Iterator[str]:
    """A migrated schema no other test is using, as fresh as a new one, from this process's
    pool. When the test has ended (all its fixtures too: ``tests/conftest.py``), it goes back
    to the pool if it can be made as fresh again, else it is dropped. Skips the test without
    PostgreSQL, fails it under CI."""
    require_pg()
    pool = pg_schema_pool()
    schema = pool.take()
    try:
        yield schema
    finally:
        pool.give_back_later(schema)


@contextlib.contextmanager
def pooled_pg_url(**params: str) -> Iterator[str]:
    """The test server's URL on a schema of :func:`pooled_schema` (with ``params`` besides)."""
    with pooled_schema() as schema:
        yield with_params(PG_URL, schema=schema, **params)


@contextlib.contextmanager
def fresh_schema() -> Iterator[str]:
    """A schema name no test has used: no such schema exists until the test makes one (its
    store's first start does), and it is dropped afterwards. For tests of what happens to a
    schema that is new or not migrated; others take :func:`pooled_schema`, much cheaper."""
    require_pg()
    schema = new_schema_name()
    try:
        yield schema
    finally:
        drop_schema(schema)


@contextlib.contextmanager
def fresh_pg_url() -> Iterator[str]:
    """The test server's URL on a schema of :func:`fresh_schema`."""
    with fresh_schema() as schema:
        yield with_params(PG_URL, schema=schema)


def new_schema_name() -> str:
    """A schema name no test has used (the schema itself is not made)."""
    return f"t_{uuid.uuid4().hex[:16]}"


def drop_schema(schema: str) -> None:
    """Drop a test's schema (and everything in it), however the test left it."""
    from schema_pool import drop_schema as drop

    drop(PG_URL, schema)


async def wait_until(predicate: Callable[[], bool], within: float = 60.0) -> None:
    """Poll ``predicate`` (cheaply) until it holds; fail the test after ``within`` seconds."""
    await until(predicate, within, "the condition", every=0.01)


async def blocked_by(holder: Any, within: float = 60.0) -> list[int]:
    """The backends waiting for a lock that ``holder``'s transaction holds (a psycopg async
    connection), once there is one: how a test knows a statement is blocked, where a pause
    would guess how long it takes to get there."""
    pids: list[int] = []

    async def blocked() -> bool:
        cur = await holder.execute(
            "SELECT pid FROM pg_stat_activity WHERE pg_backend_pid() = ANY(pg_blocking_pids(pid))"
        )
        pids[:] = [int(pid) for (pid,) in await cur.fetchall()]
        return bool(pids)

    await until(blocked, within, "a statement waiting for the held lock", every=0.01)
    return pids


def new_timer(
    key: str | None,
    due: datetime | timedelta = NOW,
    *,
    namespace: str = "ns",
    type: str | None = None,
    payload: Any = None,
    max_attempts: int = 3,
    **fields: Any,
) -> NewTimer:
    """A NewTimer due at ``due`` (or NOW + ``due``); its type is ``t.<key>`` unless given.
    Without a key (None) the store generates one."""
    due_at = NOW + due if isinstance(due, timedelta) else due
    return NewTimer(
        namespace=namespace,
        key=key,
        type=f"t.{key}" if type is None else type,
        payload={"key": key} if payload is None else payload,
        due_at=due_at,
        max_attempts=max_attempts,
        **fields,
    )
