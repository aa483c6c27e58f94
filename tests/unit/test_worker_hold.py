"""A row claimed ahead is held until its instant by the worker's clock, whatever that clock's
pace against the monotonic clock the sleeps count."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import pytest

from duetime.worker import executor


class SlowClock:
    """A clock that advances slower than the monotonic one and reads a microsecond low, as the
    database's clock bound does (its drift allowance), here 1,000 times more so."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.start = time.monotonic()
        self.origin = datetime(2026, 1, 1, tzinfo=UTC)
        self.reads = 0

    def now(self) -> datetime:
        self.reads += 1
        elapsed = (time.monotonic() - self.start) * self.rate
        return self.origin + timedelta(seconds=elapsed) - timedelta(microseconds=1)


@pytest.mark.parametrize("rate", [1.0, 1 - 50e-3])
def test_a_hold_ends_only_once_the_workers_clock_has_reached_the_instant(rate: float) -> None:
    clock = SlowClock(rate)
    until = clock.origin + timedelta(milliseconds=3)

    async def hold() -> datetime:
        await executor._hold(clock, until)
        return clock.now()

    assert asyncio.run(hold()) >= until
    if rate < 1:
        assert clock.reads >= 4  # read again after a sleep that ended short of the instant


def test_a_hold_whose_instant_has_passed_returns_at_once() -> None:
    clock = SlowClock(1.0)

    async def hold() -> None:
        await executor._hold(clock, clock.origin - timedelta(seconds=1))

    asyncio.run(hold())
    assert clock.reads == 1
