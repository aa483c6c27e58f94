"""The retention service on both backends: a round now, rounds in the background, in a worker.

The clock is frozen and moved on by hand; only the pause between rounds is real (a few ms).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from datetime import timedelta

import pytest
from storekit import NOW, new_timer, wait_until

from duetime import App, AsyncApp
from duetime.clock import FrozenClock
from duetime.config import Settings
from duetime.model import Finish, Outcome
from duetime.model.history import MaintenanceReport, RetentionPolicy
from duetime.services.retention import Retention, policy_of
from duetime.store import Store

POLICY = RetentionPolicy(retention=timedelta(days=30), archive_after=timedelta(hours=1))
QUICK = timedelta(milliseconds=20)


async def finished_and_pending(store: Store) -> None:
    """``old`` done at NOW, and ``pending`` (the newest) due in a year."""
    await store.put_timers(
        [new_timer("old"), new_timer("pending", timedelta(days=365))], "error", NOW
    )
    (claimed,) = await store.claim_due("ns", None, NOW, 10, "n1", NOW + timedelta(minutes=1))
    await store.finish([Finish(claimed.timer.id, claimed.attempt, Outcome.DONE)], "n1", NOW)


async def test_a_round_uses_the_policy_and_the_clock(store: Store, backend: str) -> None:
    await finished_and_pending(store)
    clock = FrozenClock(NOW + timedelta(hours=2))
    retention = Retention(store, clock, POLICY, QUICK)
    first = await retention.run_once()
    assert first.archived == (1 if backend == "postgres" else 0)
    assert await store.get_timer("ns", "old") is not None
    clock.advance(timedelta(days=62))
    second = await retention.run_once()
    assert await store.get_timer("ns", "old") is None
    assert await store.get_timer("ns", "pending") is not None
    assert retention.rounds == 2
    assert retention.total == first + second


async def test_rounds_run_in_the_background_until_stopped(store: Store) -> None:
    await finished_and_pending(store)
    clock = FrozenClock(NOW)
    retention = Retention(store, clock, POLICY, QUICK)
    stop = asyncio.Event()
    task = asyncio.create_task(retention.run(stop))
    await wait_until(lambda: retention.rounds >= 2)
    assert await store.get_timer("ns", "old") is not None
    clock.advance(timedelta(days=62))
    done = retention.rounds
    await wait_until(lambda: retention.rounds > done + 1)
    assert await store.get_timer("ns", "old") is None
    stop.set()
    await asyncio.wait_for(task, 1.0)


async def test_a_failed_round_is_logged_and_the_next_one_runs(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    await finished_and_pending(store)
    retention = Retention(store, FrozenClock(NOW + timedelta(days=62)), POLICY, QUICK)
    await store.close()  # every call fails until it is open again
    stop = asyncio.Event()
    with caplog.at_level(logging.ERROR, logger="duetime.retention"):
        task = asyncio.create_task(retention.run(stop))
        await wait_until(lambda: len(caplog.records) >= 2)
        assert retention.rounds == 0
        await store.open()
        await wait_until(lambda: retention.rounds >= 1)
    assert "the retention step failed" in caplog.records[0].getMessage()
    assert await store.get_timer("ns", "old") is None
    stop.set()
    await asyncio.wait_for(task, 1.0)


async def test_a_worker_maintains_as_its_settings_say(store: Store, store_url: str) -> None:
    await finished_and_pending(store)
    settings = replace(
        Settings(database_url=store_url, namespace="ns"),
        retention=timedelta(days=7),
        archive_after=timedelta(minutes=5),
        maintenance_interval=QUICK,
    )
    assert policy_of(settings) == RetentionPolicy(timedelta(days=7), timedelta(minutes=5))
    clock = FrozenClock(NOW + timedelta(days=8))
    app = AsyncApp(settings=settings, store=store, clock=clock)
    worker = app.worker(materialize=False)
    retention = worker.service(Retention)
    assert retention is not None
    assert retention.policy == policy_of(settings)
    task = asyncio.create_task(worker.run())
    await wait_until(lambda: retention.rounds >= 1)
    assert await store.get_timer("ns", "old") is None
    assert retention.total.deleted + retention.total.archived >= 1
    worker.stop()
    await asyncio.wait_for(task, 5.0)
    assert app.worker(maintain=False).service(Retention) is None


def test_an_empty_report_adds_up() -> None:
    report = MaintenanceReport(1, 2, ("a",), ("b",))
    assert report + MaintenanceReport() == report
    assert report.changed
    assert not MaintenanceReport().changed


def test_the_blocking_app_lists_events_and_applies_the_retention(store_url: str) -> None:
    clock = FrozenClock(NOW)
    with App(store_url, "ns", clock=clock) as app:
        app.handler("order.paid")(lambda event: None)
        app.emit("order.paid", {"order": 7}, key="e1")
        app.tick()
        app.schedule("order.paid", delay="P1Y", key="next-year")
        (event,) = app.events.log(type="order.*", since="PT1M").items
        assert (event.timer.key, [d.outcome for d in event.deliveries]) == ("e1", [Outcome.DONE])
        assert (app.maintain().archived, app.maintain().deleted) == (0, 0)
        clock.advance(timedelta(days=62))
        assert app.maintain().deleted == 1
        assert app.events.log().items == []
        assert [t.key for t in app.timers.history().items] == ["next-year"]
