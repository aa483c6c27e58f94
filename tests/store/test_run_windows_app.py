"""Run windows through the timers part on both stores: an even group is spread once the put
commits, a window too short for its type's rate limit warns (stored all the same)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from duetime.app.audit import Audit
from duetime.app.context import AppContext
from duetime.app.limits import Limits
from duetime.app.timers import Timers
from duetime.app.window_warnings import WindowOverRate, collecting
from duetime.clock import FrozenClock
from duetime.config import Settings
from duetime.requests import TimerRequest
from duetime.store import create_store
from duetime.store.run_windows import SpreadGroup
from duetime.timemath.run_window import even_offset, hashed_instant

START = datetime(2025, 3, 3, 8, 0, tzinfo=UTC)
NINE = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
WINDOW = timedelta(minutes=10)


@pytest.fixture
def context(store_url: str, runner: asyncio.Runner) -> Iterator[AppContext]:
    store = create_store(store_url)
    yield AppContext(store, FrozenClock(START), Settings(), "win")
    runner.run(store.close())


def greetings(count: int) -> list[TimerRequest]:
    return [
        TimerRequest("greet", {"n": i}, at=NINE, key=f"u-{i:04d}", window=WINDOW, spread="even")
        for i in range(count)
    ]


async def test_an_even_group_is_spread_when_stored(context: AppContext) -> None:
    timers = Timers(context, Audit(context))
    results = await timers.schedule_many(greetings(50))
    step = WINDOW / 50
    for rank, result in enumerate(sorted(results, key=lambda r: r.timer.key)):
        assert result.timer.due_at == NINE
        assert result.timer.run_at == NINE + even_offset(rank, 50, WINDOW) == NINE + rank * step
    group = SpreadGroup("win", "greet", NINE, WINDOW)
    assert await context.store.spreads.spread([group]) == 0  # placed when written: none moves
    one = await timers.schedule("greet", at=NINE, key="z-late", window=WINDOW, spread="even")
    assert one.timer.run_at == NINE + even_offset(50, 51, WINDOW)  # "z-late" sorts last
    first = await timers.get("u-0000")
    assert first.run_at == NINE  # the group was spread again over 51


async def test_a_hashed_window_answers_its_instant(context: AppContext) -> None:
    timers = Timers(context, Audit(context))
    result = await timers.schedule("remind", at=NINE, key="r-1", window="PT15M")
    expected = hashed_instant("win", "r-1", NINE, timedelta(minutes=15))
    assert (result.timer.due_at, result.timer.run_at, result.timer.spread) == (
        NINE,
        expected,
        "hash",
    )


async def test_a_window_too_short_for_the_rate_limit_warns(context: AppContext) -> None:
    audit = Audit(context)
    timers, limits = Timers(context, audit), Limits(context, audit)
    await limits.set("greet", rate="1/min")
    with pytest.warns(WindowOverRate, match="exceed the rate limit 1/min"):
        await timers.schedule_many(greetings(20))  # 20 in 10 minutes at 1 a minute: no
    with collecting() as found:
        await timers.schedule_many(greetings(20))
    assert found == []  # kept as they were: nothing new to warn of
    with collecting() as found:
        await timers.schedule("greet", at=NINE + timedelta(hours=1), window="PT10M")
    assert found == []  # one in ten minutes fits
