"""A schedule's run window on each backend: each occurrence keeps its nominal instant (its
key) and runs at the hashed instant a timer with that key and window gets; a window longer
than the rule's period is refused naming ``window``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from duetime import AsyncApp, FrozenClock
from duetime.errors import InvalidInput
from duetime.schedules import occurrence_key
from duetime.store import Store
from duetime.timemath.run_window import hashed_instant

START = datetime(2025, 3, 8, 12, 0, tzinfo=UTC)
WINDOW = timedelta(minutes=15)


def app_on(store: Store, clock: FrozenClock) -> AsyncApp:
    return AsyncApp(store.url, "ns", clock=clock, store=store)


async def test_occurrences_run_within_the_schedules_window(store: Store) -> None:
    clock = FrozenClock(START)
    app = app_on(store, clock)
    _, schedule = await app.schedules.add("daily", "report", cron="0 9 * * *", window="PT15M")
    assert (schedule.window, schedule.to_dict()["window"]) == (WINDOW, 900.0)
    assert (await app.schedules.get("daily")).window == WINDOW
    clock.advance(timedelta(days=1))
    materializer = app.schedules.materializer(check_tzdata=False)
    assert await materializer.tick(clock.now()) == 1
    nine = datetime(2025, 3, 9, 9, tzinfo=UTC)
    key = occurrence_key("daily", nine)
    timer = await app.timers.get(key)
    assert timer.due_at == nine
    assert timer.run_at == hashed_instant("ns", key, nine, WINDOW)
    assert (timer.window, timer.spread) == (WINDOW, "hash")
    assert nine < timer.run_at < nine + WINDOW
    every = await app.schedules.add("often", "ping", every="PT10M", window="PT10M")
    assert every[1].window == timedelta(minutes=10)  # a window as long as the period is allowed
    cleared = await app.schedules.update("daily", window=None)
    assert cleared.window is None


@pytest.mark.parametrize(
    ("rule", "window", "message"),
    [
        ({"every": "PT10M"}, "PT11M", "period"),
        ({"cron": "0 9 * * 1-5"}, "P2D", "period"),  # weekdays: a day apart at the least
        ({"cron": "0 9 * * *"}, "PT0S", "positive"),
        ({"cron": "0 9 * * *"}, "soon", "duration"),
    ],
)
async def test_a_bad_schedule_window_is_refused_naming_it(
    store: Store, rule: dict[str, str], window: str, message: str
) -> None:
    app = app_on(store, FrozenClock(START))
    with pytest.raises(InvalidInput, match=message) as raised:
        await app.schedules.add("bad", "t", window=window, **rule)  # type: ignore[arg-type]
    assert raised.value.field == "window"
    assert (await app.schedules.list()).items == []
