"""A row claimed ahead is held until its instant by the worker's clock, whatever that clock's
pace against the monotonic clock the sleeps count."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import pytest

from duetime.worker import executor

ORIGIN = datetime(2026, 1, 1, tzinfo=UTC)


class SlowClock:
    """A clock that advances slower than the monotonic one and reads a microsecond low, as the
    database's clock bound does (its drift allowance), here up to 1,000 times more so."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.start = time.monotonic()

    def now(self) -> datetime:
        elapsed = (time.monotonic() - self.start) * self.rate
        return ORIGIN + timedelta(seconds=elapsed) - timedelta(microseconds=1)


class SteppingClock:
    """A clock that moves one millisecond each time it is read, however long a sleep took."""

    def __init__(self) -> None:
        self.seen: list[datetime] = []

    def now(self) -> datetime:
        self.seen.append(ORIGIN + timedelta(milliseconds=len(self.seen)))
        return self.seen[-1]


@pytest.mark.parametrize("rate", [1.0, 1 - 50e-3])
def test_a_hold_ends_only_once_the_workers_clock_has_reached_the_instant(rate: float) -> None:
    clock = SlowClock(rate)
    until = ORIGIN + timedelta(milliseconds=3)

    async def hold() -> datetime:
        await executor._hold(clock, until)
        return clock.now()

    assert asyncio.run(hold()) >= until


def test_a_hold_reads_the_clock_again_after_each_sleep_until_the_instant() -> None:
    clock = SteppingClock()
    until = ORIGIN + timedelta(milliseconds=3)
    asyncio.run(executor._hold(clock, until))
    # each sleep was as long as the clock said was left, yet the clock moved only 1 ms: the hold
    # slept again, three times, and returned at the first reading at the instant
    assert clock.seen == [ORIGIN + timedelta(milliseconds=ms) for ms in range(4)]


def test_a_hold_whose_instant_has_passed_returns_at_once() -> None:
    clock = SteppingClock()
    asyncio.run(executor._hold(clock, ORIGIN - timedelta(seconds=1)))
    assert clock.seen == [ORIGIN]
