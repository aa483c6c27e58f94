"""A worker started while the database is unavailable waits for it, then works: it never exits
of an outage at start (a supervisor restarting workers during a database restart would
otherwise lose each one it starts then)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest
from tests.waiting import until

from duetime import AsyncApp, Event
from duetime.api.app import create_api
from duetime.api.config import ApiSettings
from duetime.app.runner import work
from duetime.config import Settings
from duetime.errors import StoreUnavailable
from duetime.services import startup
from duetime.store import create_store
from duetime.timemath.backoff import Backoff

QUICK = Backoff(timedelta(milliseconds=10), timedelta(milliseconds=20))

FAILING_AT_START = [
    "open",  # opening the store (and migrating)
    "ensure_namespace",  # the app's first write after opening
    "register_node",  # the node's start
    "list_nodes",  # rescue's start: nodes of this host whose process is gone
    "rescue",  # rescue's first round
]


def failing_first(store: object, method: str, times: int) -> list[int]:
    """Make ``store.method`` raise StoreUnavailable on its first ``times`` calls; the list
    counts the calls made."""
    real: Callable[..., Awaitable[Any]] = getattr(store, method)
    calls = [0]

    async def flaky(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] <= times:
            raise StoreUnavailable(f"{method}: the database is restarting")
        return await real(*args, **kwargs)

    setattr(store, method, flaky)
    return calls


@pytest.mark.parametrize("method", FAILING_AT_START)
async def test_a_worker_started_during_an_outage_waits_then_fires(
    store_url: str,
    method: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(startup, "START_BACKOFF", QUICK)
    async with AsyncApp(store_url) as producer:
        await producer.schedule("ping", {}, delay=0, key="due")

    app = AsyncApp(store_url)
    fired = asyncio.Event()

    @app.handler("ping")
    async def ping(event: Event) -> None:
        fired.set()

    calls = failing_first(app.store, method, 3)
    stop = asyncio.Event()
    with caplog.at_level(logging.WARNING, logger="duetime.services"):
        running = asyncio.create_task(work(app, stop))
        try:
            await until(
                lambda: fired.is_set() or running.done(), 30, "the worker to fire the timer"
            )
            assert not running.done(), "the worker ended by itself"
        finally:
            stop.set()
            await running
    assert calls[0] >= 4
    waits = [r for r in caplog.records if "database unavailable at start" in r.getMessage()]
    assert len(waits) == 3
    assert all(r.levelno == logging.WARNING for r in waits)
    async with AsyncApp(store_url) as reader:
        assert (await reader.get("due")).status.value == "done"


async def test_a_worker_stopped_while_waiting_for_the_database_ends_cleanly(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(startup, "START_BACKOFF", QUICK)
    app = AsyncApp(store_url)
    calls = failing_first(app.store, "open", 10**9)
    stop = asyncio.Event()
    running = asyncio.create_task(work(app, stop))
    await until(lambda: calls[0] >= 2, 30, "the worker to try the database again")
    stop.set()
    stats = await running
    assert stats.claimed == 0


async def test_tick_does_not_wait_for_the_database(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A one-shot run by cron fails at once with the store's error: the next run retries."""
    monkeypatch.setattr(startup, "START_BACKOFF", QUICK)
    app = AsyncApp(store_url)
    calls = failing_first(app.store, "register_node", 1)
    try:
        with pytest.raises(StoreUnavailable, match="restarting"):
            await app.tick()
    finally:
        await app.close()
    assert calls[0] == 1


async def test_a_failed_migration_is_not_waited_out(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the database being away is waited for: a migration that fails stops the start."""
    monkeypatch.setattr(startup, "START_BACKOFF", QUICK)
    app = AsyncApp(store_url)
    calls = [0]

    async def broken(*, migrate: bool = True) -> None:
        calls[0] += 1
        raise RuntimeError("migration 31 failed: syntax error at or near 'CREAT'")

    monkeypatch.setattr(app.store, "open", broken)
    with pytest.raises(RuntimeError, match="migration 31 failed"):
        await work(app, asyncio.Event())
    assert calls[0] == 1


async def test_serve_started_during_an_outage_waits_then_its_worker_fires(
    store_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(startup, "START_BACKOFF", QUICK)
    async with AsyncApp(store_url) as producer:
        await producer.schedule("ping", {}, delay=0, key="due")
    store = create_store(store_url)
    calls = failing_first(store, "open", 3)
    worker_app = AsyncApp(store=store)
    fired = asyncio.Event()

    @worker_app.handler("ping")
    async def ping(event: Event) -> None:
        fired.set()

    api = create_api(
        ApiSettings(core=Settings(database_url=store_url), auth=False),
        store=store,
        workers=[worker_app],
    )
    service = api.state.duetime
    with caplog.at_level(logging.WARNING, logger="duetime.services"):
        await service.start()
    try:
        await until(fired.is_set, 30, "serve's worker to fire the timer")
    finally:
        await service.stop()
    assert calls[0] >= 4
    assert any("database unavailable at start" in r.getMessage() for r in caplog.records)
