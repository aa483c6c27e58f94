"""Helpers shared by the store tests: the test database, a fixed "now", and small waits."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import uuid
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from duetime.model import NewTimer
from duetime.store import Store

PG_URL = os.environ.get("DUETIME_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
TEST_TIMEOUT = 120.0

StoreFactory = Callable[..., Awaitable[Store]]


@functools.cache
def _pg_problem() -> str | None:
    """Why PostgreSQL cannot be used for tests (None when it can)."""
    try:
        import psycopg
    except ImportError as exc:
        return f"psycopg is not installed ({exc})"
    try:
        with psycopg.connect(PG_URL, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return f"cannot connect to {PG_URL} ({exc})".strip()
    return None


def require_pg() -> str:
    """The test PostgreSQL URL; skips the test (fails it under CI) when there is none."""
    problem = _pg_problem()
    if problem is not None:
        message = f"PostgreSQL unavailable, set DUETIME_TEST_PG: {problem}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return PG_URL


def with_params(url: str, **params: str) -> str:
    extra = "&".join(f"{name}={value}" for name, value in params.items())
    return f"{url}{'&' if '?' in url else '?'}{extra}"


@contextlib.contextmanager
def fresh_pg_url() -> Iterator[str]:
    """The test server's URL on a schema no other test uses, dropped afterwards (skips the
    test without PostgreSQL, fails it under CI)."""
    require_pg()
    schema = f"t_{uuid.uuid4().hex[:16]}"
    yield with_params(PG_URL, schema=schema)
    drop_schema(schema)


def drop_schema(schema: str) -> None:
    """Drop a test's schema. A process the test killed may still have a server backend finishing
    its last statement in it, which can deadlock with the drop: that is tried again."""
    import time

    import psycopg
    from psycopg import sql

    drop = sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
    for attempt in range(5):
        try:
            with psycopg.connect(PG_URL, autocommit=True) as conn:
                conn.execute(drop)
            return
        except (psycopg.errors.DeadlockDetected, psycopg.errors.LockNotAvailable):
            if attempt == 4:
                raise
            time.sleep(0.5)


async def wait_until(predicate: Callable[[], bool], within: float = 5.0) -> None:
    """Poll ``predicate`` (cheaply) until it holds; fail the test after ``within`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not predicate():
        if loop.time() > deadline:
            pytest.fail(f"condition not met within {within} s")
        await asyncio.sleep(0.01)


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
