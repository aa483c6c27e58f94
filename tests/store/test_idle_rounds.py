"""What an idle node's periodic rounds send its database, counted, never timed.

The wake-up listener's liveness probe is a pipeline's sync alone (a query, even ``SELECT 1``,
is a transaction in ``pg_stat_database``); the schedules' materialiser, re-checking with
nothing due, reads when the next schedule is due and materialises nothing.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from storekit import PG_URL
from tests.waiting import until

from duetime import FrozenClock
from duetime.services.materializer import Materializer
from duetime.store import Store
from duetime.store.postgres.wakeup import probe

START = datetime(2025, 3, 8, 12, 0, tzinfo=UTC)


async def test_the_listeners_probe_runs_no_statement() -> None:
    conn = await psycopg.AsyncConnection.connect(PG_URL, autocommit=True)
    admin = await psycopg.AsyncConnection.connect(PG_URL, autocommit=True)
    try:
        await conn.execute('LISTEN "duetime_probe_test"')
        pid = conn.info.backend_pid

        async def last_statement() -> str:
            row = await (
                await admin.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", [pid])
            ).fetchone()
            assert row is not None
            return str(row[0])

        assert await last_statement() == 'LISTEN "duetime_probe_test"'
        for _ in range(3):
            await probe(conn)
        # The server answered, and ran nothing: its last statement is still the LISTEN.
        assert await last_statement() == 'LISTEN "duetime_probe_test"'

        await admin.execute("SELECT pg_terminate_backend(%s)", [pid])
        with pytest.raises(psycopg.OperationalError):  # a dead line is still found out
            await asyncio.wait_for(probe(conn), 5)
    finally:
        await conn.close()
        await admin.close()


class CountedSchedules:
    """A store's schedules part, counting its calls by name."""

    def __init__(self, inner: Any, calls: Counter[str]) -> None:
        self._inner, self._calls = inner, calls

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if not asyncio.iscoroutinefunction(value):
            return value

        async def call(*args: Any, **kwargs: Any) -> Any:
            self._calls[name] += 1
            return await value(*args, **kwargs)

        return call


class CountedStore:
    def __init__(self, inner: Store, calls: Counter[str]) -> None:
        self._inner = inner
        self.schedules = CountedSchedules(inner.schedules, calls)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


async def test_an_idle_materialisers_recheck_is_one_read(store: Store) -> None:
    calls: Counter[str] = Counter()
    clock = FrozenClock(START)  # never moved: no schedule ever comes due
    counted: Any = CountedStore(store, calls)
    materializer = Materializer(
        counted, clock, "ns", recheck=timedelta(milliseconds=1), check_tzdata=False
    )
    stop = asyncio.Event()
    task = asyncio.create_task(materializer.run(stop))
    try:
        await until(lambda: calls["next_schedule_at"] >= 6, 60, "six re-checks", every=0.01)
    finally:
        stop.set()
        await task
    assert calls["next_schedule_at"] >= 6
    # The first round materialises (whatever is due at start); the re-checks after it only
    # read when the next schedule is due.
    assert calls["materialize"] == 1, dict(calls)
