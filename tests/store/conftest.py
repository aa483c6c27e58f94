"""Fixtures for the store conformance suite: every test runs against SQLite and PostgreSQL.

Tests are ``async def``; each runs on its own event loop (``runner``), the one its stores were
opened on. PostgreSQL is found via ``DUETIME_TEST_PG``; when it cannot be reached the PostgreSQL
cases are skipped with the reason — or fail when ``CI`` is set, so CI never passes by skipping.
Each PostgreSQL test gets a schema of its own (``?schema=t_<random>``): an already migrated one
from this process's pool (``pg_schema``, ``pg_url``), as fresh as a new one and put back
afterwards, or one that does not exist yet (``pg_fresh_schema``, ``pg_fresh_url``) for the tests
of what happens to a new schema; see ``schema_pool``.
"""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from storekit import (
    PG_URL,
    TEST_TIMEOUT,
    StoreFactory,
    bounded,
    fresh_schema,
    pooled_schema,
    with_params,
)

from duetime.store import Store, create_store


@pytest.fixture
def login_role() -> Iterator[str]:
    """A PostgreSQL login role of its own, dropped (with every right it was given) afterwards:
    the role a service in another language logs in as, for the SQL functions' grants."""
    name = f"dt_role_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{name}" LOGIN')
    try:
        yield name
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP OWNED BY "{name}"')
            conn.execute(f'DROP ROLE "{name}"')


@pytest.fixture
def pg_schema() -> Iterator[str]:
    """A migrated schema no other test is using, as fresh as a new one (from the pool: opening
    a store on it migrates nothing); put back or dropped afterwards."""
    with pooled_schema() as schema:
        yield schema


@pytest.fixture
def pg_url(pg_schema: str) -> str:
    return bounded(with_params(PG_URL, schema=pg_schema))


@pytest.fixture
def pg_fresh_schema() -> Iterator[str]:
    """A schema name no test has used: the schema does not exist until the test (its first
    store) makes it. For tests of a new schema: its creation, the migrations, a store opened
    without migrating on a schema no one migrated. Dropped afterwards."""
    with fresh_schema() as schema:
        yield schema


@pytest.fixture
def pg_fresh_url(pg_fresh_schema: str) -> str:
    return bounded(with_params(PG_URL, schema=pg_fresh_schema))


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture(autouse=True)
def runner() -> Iterator[asyncio.Runner]:
    """The event loop of one test: its stores are opened, used and closed on it."""
    with asyncio.Runner() as loop_runner:
        yield loop_runner


@pytest.fixture
def open_store(runner: asyncio.Runner) -> Iterator[StoreFactory]:
    """Open a store on a URL for this test; it is closed when the test ends."""
    opened: list[Store] = []

    async def open_one(url: str, *, migrate: bool = True) -> Store:
        store = create_store(url)
        await store.open(migrate=migrate)
        opened.append(store)
        return store

    yield open_one
    for store in reversed(opened):
        runner.run(store.close())


@pytest.fixture
def make_store(store_url: str, open_store: StoreFactory) -> StoreFactory:
    """Open another store on the backend's database (another process, as far as it can tell)."""

    async def make(*, migrate: bool = True) -> Store:
        return await open_store(store_url, migrate=migrate)

    return make


@pytest.fixture
def store(store_url: str, open_store: StoreFactory, runner: asyncio.Runner) -> Store:
    async def open_one() -> Store:
        return await open_store(store_url)

    return runner.run(open_one())


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run ``async def`` tests on the test's own loop (no plugin needed)."""
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    loop_runner: asyncio.Runner = pyfuncitem.funcargs["runner"]  # type: ignore[assignment]
    names = pyfuncitem._fixtureinfo.argnames
    kwargs: dict[str, Any] = {name: pyfuncitem.funcargs[name] for name in names}

    async def run() -> None:
        await asyncio.wait_for(pyfuncitem.obj(**kwargs), TEST_TIMEOUT)

    loop_runner.run(run())
    return True
