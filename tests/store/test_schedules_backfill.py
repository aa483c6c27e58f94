"""A schedule's backfill on each backend, with a frozen clock: the occurrences of a past range
made as timers under the materialiser's own keys, so a backfill twice creates nothing twice and
an occurrence already made (or run) is kept; cron, interval and RFC 5545 rules with calendars;
bad ranges refused naming the field."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from duetime import AsyncApp, FrozenClock
from duetime.errors import InvalidInput
from duetime.model import Status
from duetime.schedules import occurrence_key
from duetime.store import Store

START = datetime(2025, 3, 8, 12, 0, tzinfo=UTC)


def app_on(store: Store, clock: FrozenClock) -> AsyncApp:
    return AsyncApp(store.url, "ns", clock=clock, store=store)


async def test_a_backfill_uses_the_materialisers_keys_and_never_repeats(store: Store) -> None:
    clock = FrozenClock(START)
    app = app_on(store, clock)
    await app.schedules.add("daily", "report.daily", cron="0 9 * * *", payload={"r": 1})
    clock.advance(timedelta(days=1))  # 2025-03-09 12:00: the 09:00 occurrence is due
    materializer = app.schedules.materializer(check_tzdata=False)
    assert await materializer.tick(clock.now()) >= 1
    made = await app.timers.get(occurrence_key("daily", datetime(2025, 3, 9, 9, tzinfo=UTC)))
    await app.timers.cancel(made.key)  # it ran its course one way or another: not again
    dry = await app.schedules.backfill(
        "daily", from_="2025-03-05T00:00:00Z", to="2025-03-09T09:00:00Z", dry_run=True
    )
    assert [o.due_at.day for o in dry.occurrences] == [5, 6, 7, 8, 9]
    assert [o.existed for o in dry.occurrences] == [False, False, False, False, True]
    assert (dry.created, await app.timers.counts()) == (0, await app.timers.counts())
    first = await app.schedules.backfill(
        "daily", from_="2025-03-05T00:00:00Z", to="2025-03-09T09:00:00Z"
    )
    assert (first.created, first.existing) == (4, 1)
    again = await app.schedules.backfill(
        "daily", from_="2025-03-05T00:00:00Z", to="2025-03-09T09:00:00Z"
    )
    assert (again.created, again.existing) == (0, 5)
    timer = await app.timers.get(occurrence_key("daily", datetime(2025, 3, 6, 9, tzinfo=UTC)))
    assert (timer.type, timer.payload, timer.status) == ("report.daily", {"r": 1}, Status.SCHEDULED)
    assert (await app.timers.get(made.key)).status is Status.CANCELLED  # kept as it was
    # Due in the past: claimed at once (flow control applies at the claim as usual).
    claimed = await store.claim_due(
        "ns", None, clock.now(), 10, "n1", clock.now() + timedelta(minutes=1)
    )
    assert sorted(c.timer.due_at.day for c in claimed) == [5, 6, 7, 8]


async def test_interval_and_rrule_schedules_with_calendars_backfill(store: Store) -> None:
    clock = FrozenClock(START)
    app = app_on(store, clock)
    await app.schedules.add("every6h", "tick", every="PT6H", start_at="2025-03-01T00:00:00Z")
    report = await app.schedules.backfill(
        "every6h", from_="2025-03-02T00:00:00Z", to="2025-03-02T23:59:59Z"
    )
    assert [o.due_at.hour for o in report.occurrences] == [0, 6, 12, 18]
    await app.schedules.add(
        "weekdays",
        "payroll",
        rrule="FREQ=DAILY",
        dtstart="2025-03-01T08:00:00",
        timezone="Europe/Paris",
        exdates=["2025-03-05T08:00:00"],
        weekend="sat,sun",
        roll="skip",
    )
    report = await app.schedules.backfill(
        "weekdays", from_="2025-03-01T00:00:00Z", to="2025-03-08T00:00:00Z", dry_run=True
    )
    days = [o.due_at.day for o in report.occurrences]
    assert days == [3, 4, 6, 7]  # no weekend, no 5 March (an EXDATE)
    assert all(o.due_at.hour == 7 for o in report.occurrences)  # 08:00 in Paris is 07:00 UTC


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"from_": "2025-03-02T00:00:00Z", "to": "2025-03-01T00:00:00Z"}, "from"),
        ({"from_": "2025-03-01T00:00:00Z", "to": "2999-01-01T00:00:00Z"}, "to"),
        ({"from_": "2025-03-01", "to": "2025-03-02T00:00:00Z"}, "from"),
        ({"from_": "2020-01-01T00:00:00Z", "to": "2025-03-01T00:00:00Z"}, "yes"),
    ],
)
async def test_bad_backfills_name_the_field_and_store_nothing(
    store: Store, kwargs: dict[str, str], field: str
) -> None:
    clock = FrozenClock(START)
    app = app_on(store, clock)
    await app.schedules.add("minutely", "m", cron="* * * * *")
    with pytest.raises(InvalidInput) as raised:
        await app.schedules.backfill("minutely", **kwargs)  # type: ignore[arg-type]
    assert raised.value.field == field
    assert sum((await app.timers.counts()).values()) == 0


async def test_a_large_backfill_goes_with_yes(store: Store) -> None:
    clock = FrozenClock(START)
    app = app_on(store, clock)
    await app.schedules.add("minutely", "m", cron="* * * * *")
    report = await app.schedules.backfill(
        "minutely", from_="2025-02-01T00:00:00Z", to="2025-02-08T00:00:00Z", yes=True
    )
    assert report.created == 7 * 24 * 60 + 1
