"""What an idle worker costs its database: transactions per heartbeat interval.

A worker with only future timers still keeps its node alive (heartbeat), its clock on the
database's, its routing fresh, rescue and the no-subscriber sweep going, and re-checks the next
due time. Each store call is a transaction of its own, and so is each read of the database's
clock outside one; the test counts both over several heartbeat intervals, with every interval
scaled down from the defaults in the same proportions (rescue every half heartbeat, the
re-check every three, maintenance every six), against the budget of 0.5 transactions a second
at the default 10 s heartbeat: 5 a heartbeat interval.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

from storekit import PG_URL, StoreFactory, wait_until, with_params

from duetime import AsyncApp, Event, TimerRequest
from duetime.clock import DatabaseClock
from duetime.config import Settings

HEARTBEAT = 0.4
INTERVALS = 6
BUDGET = 5  # transactions a heartbeat interval: 0.5/s at the default 10 s heartbeat


class Counted:
    """Counts the calls to a store's methods (and its parts', e.g. ``limits``) by name."""

    def __init__(self, inner: Any, calls: Counter[str], prefix: str = "") -> None:
        self._inner, self._calls, self._prefix = inner, calls, prefix

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if name in ("limits", "history", "schedules", "outbox", "tokens"):
            return Counted(value, self._calls, f"{name}.")
        if not asyncio.iscoroutinefunction(value) or name in ("open", "close", "migrate"):
            return value

        async def call(*args: Any, **kwargs: Any) -> Any:
            self._calls[self._prefix + name] += 1
            return await value(*args, **kwargs)

        return call


def settings(url: str) -> Settings:
    return Settings(
        database_url=url,
        heartbeat=timedelta(seconds=HEARTBEAT),
        lease=timedelta(seconds=10 * HEARTBEAT),
        rescue_interval=timedelta(seconds=HEARTBEAT / 2),
        recheck=timedelta(seconds=3 * HEARTBEAT),
        maintenance_interval=timedelta(seconds=6 * HEARTBEAT),
    )


async def test_an_idle_worker_makes_at_most_half_a_transaction_a_second(
    pg_schema: str, open_store: StoreFactory
) -> None:
    url = with_params(PG_URL, schema=pg_schema)
    store = await open_store(url)
    calls: Counter[str] = Counter()
    counted: Any = Counted(store, calls)

    async def read_clock() -> datetime | None:
        calls["clock read"] += 1
        return await store.db_now()

    clock = DatabaseClock(read_clock)
    async with AsyncApp(store=counted, clock=clock, settings=settings(url)) as app:

        @app.handler("later")
        async def later(event: Event) -> None:
            raise AssertionError("nothing is due")

        start = clock.now() if clock.last else await store.db_now()
        assert start is not None
        await app.timers.schedule_many(
            [TimerRequest("later", {}, at=start + timedelta(hours=1, seconds=i)) for i in range(50)]
        )
        worker = app.worker()
        task = asyncio.create_task(worker.run())
        try:
            await wait_until(lambda: calls["heartbeat"] >= 2, within=10 * HEARTBEAT)
            before = calls.copy()
            beats = calls["heartbeat"]
            await wait_until(lambda: calls["heartbeat"] >= beats + INTERVALS, within=60)
            spent = calls - before
        finally:
            worker.stop()
            await task
    total = sum(spent.values())
    assert total <= BUDGET * INTERVALS, f"{total} in {INTERVALS} heartbeats: {dict(spent)}"
