"""RFC 5545 calendar schedules on each backend: stored durably, materialised by the same
machinery as cron schedules, every occurrence once, COUNT / UNTIL / EXDATE honoured, DST edges
resolved as RFC 5545 says (a gap time takes the offset before the gap)."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from storekit import StoreFactory
from test_schedules_materializer import all_timers, app_on, materializer, run_clock

import duetime.schedules
from duetime import FrozenClock
from duetime.errors import InvalidInput, InvalidRrule
from duetime.schedules import ScheduleRequest
from duetime.store import Store

START = datetime(2025, 3, 7, 12, 0, tzinfo=UTC)
NY = "America/New_York"


async def test_calendar_schedule_survives_a_restart(store: Store, make_store: StoreFactory) -> None:
    clock = FrozenClock(START)
    app = app_on(store, clock)
    action, made = await app.schedules.add(
        "payroll",
        "pay",
        rrule="FREQ=MONTHLY;BYMONTHDAY=15,-1",
        dtstart="2025-03-14T09:00",
        timezone="Europe/Berlin",
        holidays="DE-BE",
        roll="backward",
        exdates=["2025-04-15T09:00"],
        rdates=["2025-04-01T12:00"],
    )
    assert action == "created"
    assert made.cron is None
    assert made.every is None
    assert made.calendar is not None
    assert made.next_at == datetime(2025, 3, 14, 8, 0, tzinfo=UTC)  # 15 Mar is a Saturday
    await store.close()
    again = app_on(await make_store(), clock)
    stored = await again.schedules.get("payroll")
    assert stored.calendar == made.calendar
    assert stored.next_at == made.next_at
    view = stored.to_dict()
    assert view["rrule"] == "FREQ=MONTHLY;BYMONTHDAY=15,-1"
    assert view["holidays"] == "DE-BE"
    assert view["roll"] == "backward"
    assert view["exdates"] == ["2025-04-15T09:00:00"]


async def test_count_exdate_and_dst_edges_in_one_batch(store: Store) -> None:
    clock = FrozenClock(START)
    app = app_on(store, clock)
    await app.schedules.add(
        "night",
        "t",
        rrule="FREQ=DAILY;COUNT=5",
        dtstart="2025-03-08T02:30",
        timezone=NY,
        exdates=["2025-03-10T02:30"],
        catch_up="all",
    )
    worker = materializer(app, batch_size=500)
    clock.advance(timedelta(days=6))
    await worker.tick(clock.now())
    timers = [t for t in await all_timers(app) if t.status.value != "cancelled"]
    assert [t.due_at for t in timers] == [
        datetime(2025, 3, 8, 7, 30, tzinfo=UTC),  # 02:30 EST
        datetime(2025, 3, 9, 7, 30, tzinfo=UTC),  # 02:30 does not exist: 03:30 EDT
        datetime(2025, 3, 11, 6, 30, tzinfo=UTC),  # the 10th is an EXDATE
        datetime(2025, 3, 12, 6, 30, tzinfo=UTC),  # COUNT=5 counts the EXDATE too
    ]
    assert (await app.schedules.get("night")).next_at is None
    assert await worker.tick(clock.now() + timedelta(days=30)) == 0


async def test_until_ends_the_schedule_compared_in_utc(store: Store) -> None:
    clock = FrozenClock(START)
    app = app_on(store, clock)
    # UNTIL 13:00Z is 08:00 EST: the 08:00 occurrence of the 9th (12:00Z, EDT) is in, the
    # 10th's is not.
    await app.schedules.add(
        "u",
        "t",
        rrule="FREQ=DAILY;UNTIL=20250309T130000Z",
        dtstart="2025-03-08T08:00",
        timezone=NY,
    )
    worker = materializer(app)
    await run_clock(
        clock, START + timedelta(days=4), timedelta(hours=3), lambda: worker.tick(clock.now())
    )
    timers = await all_timers(app)
    assert [t.due_at for t in timers] == [
        datetime(2025, 3, 8, 13, 0, tzinfo=UTC),
        datetime(2025, 3, 9, 12, 0, tzinfo=UTC),
    ]
    assert (await app.schedules.get("u")).next_at is None


async def test_three_materializers_make_each_occurrence_once(
    store: Store, make_store: StoreFactory
) -> None:
    clock = FrozenClock(START)
    app = app_on(store, clock)
    zones = ["America/New_York", "Europe/Berlin", "Asia/Tokyo", "Australia/Sydney"]
    for i in range(20):
        await app.schedules.add(
            f"user-{i}",
            "t",
            rrule="FREQ=HOURLY;BYMINUTE=0,30",
            dtstart="2025-03-07T00:00",
            timezone=zones[i % len(zones)],
        )
    others = [app_on(await make_store(), clock) for _ in range(2)]
    workers = [materializer(a, batch_size=7) for a in [app, *others]]

    async def tick_all() -> None:
        await asyncio.gather(*(w.tick(clock.now()) for w in workers))

    end = START + timedelta(days=2)  # across New York's spring-forward night
    await run_clock(clock, end, timedelta(minutes=20), tick_all)
    timers = await all_timers(app)
    assert len({t.key for t in timers}) == len(timers)
    assert sum(w.created for w in workers) == len(timers)
    per_schedule = {t.key.rsplit(":", 3)[0] for t in timers}
    assert len(per_schedule) == 20
    for i in range(20):
        mine = [t for t in timers if t.key.startswith(f"schedule:user-{i}:")]
        assert len(mine) >= 2 * 48, (i, len(mine))
        instants = [t.due_at for t in mine]
        assert instants == sorted(set(instants))


@pytest.mark.parametrize(
    ("fields", "part"),
    [
        ({"rrule": "FREQ=DAILY;BYFOO=1"}, "BYFOO"),
        ({"rrule": "FREQ=MONTHLY;BYSETPOS=1"}, "BYSETPOS"),
        ({"rrule": "FREQ=DAILY;COUNT=2;UNTIL=20300101T000000Z"}, "COUNT"),
        ({"rrule": "FREQ=DAILY;UNTIL=20200101T000000Z"}, "UNTIL"),
        ({"rrule": "FREQ=YEARLY;BYMONTH=4;BYMONTHDAY=31"}, "BYMONTHDAY"),
    ],
)
async def test_bad_rules_store_nothing(store: Store, fields: dict[str, str], part: str) -> None:
    app = app_on(store, FrozenClock(START))
    with pytest.raises(InvalidRrule) as caught:
        await app.schedules.add("bad", "t", dtstart="2025-03-08T09:00", timezone=NY, **fields)
    assert caught.value.field == "rrule"
    assert part in caught.value.message
    page = await app.schedules.list()
    assert page.items == []


async def test_calendar_fields_need_an_rrule(store: Store) -> None:
    app = app_on(store, FrozenClock(START))
    with pytest.raises(InvalidInput) as caught:
        await app.schedules.add("bad", "t", cron="0 9 * * *", dtstart="2025-03-08T09:00")
    assert caught.value.field == "dtstart"
    with pytest.raises(InvalidInput) as caught:
        await app.schedules.add("bad", "t", cron="0 9 * * *", rrule="FREQ=DAILY")
    assert caught.value.field == "rrule"


async def test_switching_a_schedule_between_cron_and_rrule(store: Store) -> None:
    clock = FrozenClock(START)
    app = app_on(store, clock)
    await app.schedules.add("s", "t", cron="0 9 * * *", timezone=NY)
    switched = await app.schedules.update(
        "s", rrule="FREQ=WEEKLY;BYDAY=MO", dtstart="2025-03-10T09:00"
    )
    assert switched.cron is None
    assert switched.calendar is not None
    assert switched.next_at == datetime(2025, 3, 10, 13, 0, tzinfo=UTC)
    back = await app.schedules.update("s", cron="0 10 * * *")
    assert back.calendar is None
    assert back.cron == "0 10 * * *"


async def test_rules_alike_but_for_the_calendar_plan_apart(store: Store) -> None:
    """Two calendar schedules at the same position in one zone, one round: each its own next."""
    clock = FrozenClock(datetime(2025, 3, 7, 6, 0, tzinfo=UTC))
    app = app_on(store, clock)
    for name, rule in (("daily", "FREQ=DAILY"), ("weekly", "FREQ=WEEKLY")):
        added = await app.schedules.add(
            name, "t", rrule=rule, dtstart="2025-03-07T09:00", timezone="Europe/Berlin"
        )
        assert added[1].next_at == datetime(2025, 3, 7, 8, 0, tzinfo=UTC)
    worker = materializer(app, batch_size=500)
    clock.advance(timedelta(hours=2))
    await worker.tick(clock.now())
    assert (await app.schedules.get("daily")).next_at == datetime(2025, 3, 8, 8, 0, tzinfo=UTC)
    assert (await app.schedules.get("weekly")).next_at == datetime(2025, 3, 14, 8, 0, tzinfo=UTC)


async def test_update_changes_holiday_dates_and_weekend(store: Store) -> None:
    clock = FrozenClock(START)
    app = app_on(store, clock)
    await app.schedules.add(
        "pay",
        "t",
        rrule="FREQ=MONTHLY;BYMONTHDAY=15",
        dtstart="2025-03-15T09:00",
        timezone="Asia/Dubai",
        roll="backward",
    )
    # 15 March 2025 is a Saturday: the Saturday-Sunday weekend rolls it to Friday the 14th.
    assert (await app.schedules.get("pay")).next_at == datetime(2025, 3, 14, 5, 0, tzinfo=UTC)
    gulf = await app.schedules.update("pay", weekend=["fri", "sat"])
    assert gulf.to_dict()["weekend"] == ["fri", "sat"]
    assert gulf.next_at == datetime(2025, 3, 13, 5, 0, tzinfo=UTC)  # Thursday
    off = await app.schedules.update("pay", holiday_dates=["2025-03-13"])
    assert off.to_dict()["holiday_dates"] == ["2025-03-13"]
    assert off.next_at == datetime(2025, 3, 12, 5, 0, tzinfo=UTC)
    back = await app.schedules.update("pay", holiday_dates=None, weekend=None)
    assert back.to_dict()["weekend"] == ["sat", "sun"]
    assert back.next_at == datetime(2025, 3, 14, 5, 0, tzinfo=UTC)
    with pytest.raises(InvalidInput) as bad:
        await app.schedules.update("pay", weekend=["mon", "tue", "wed", "thu", "fri", "sat", "sun"])
    assert bad.value.field == "weekend"
    with pytest.raises(InvalidInput) as bad:
        await app.schedules.update("pay", holiday_dates=["2025-02-30"])
    assert bad.value.field == "holiday_dates"
    assert (await app.schedules.get("pay")).next_at == back.next_at  # nothing stored


async def test_modified_roll_is_stored_and_keeps_the_month(
    store: Store, make_store: StoreFactory
) -> None:
    clock = FrozenClock(START)
    app = app_on(store, clock)
    _, made = await app.schedules.add(
        "month-end",
        "t",
        rrule="FREQ=MONTHLY;BYMONTHDAY=-1",
        dtstart="2025-05-31T09:00",
        timezone="Europe/Berlin",
        roll="modified_forward",
    )
    # 31 May 2025 is a Saturday: forward would be 2 June, so back to Friday 30 May.
    assert made.next_at == datetime(2025, 5, 30, 7, 0, tzinfo=UTC)
    await store.close()
    again = app_on(await make_store(), clock)
    stored = await again.schedules.get("month-end")
    assert stored.to_dict()["roll"] == "modified_forward"
    assert stored.calendar == made.calendar
    changed = await again.schedules.update("month-end", roll="modified_backward")
    assert changed.to_dict()["roll"] == "modified_backward"
    assert changed.next_at == made.next_at  # backward stays in May too
    with pytest.raises(InvalidInput) as bad:
        await again.schedules.update("month-end", roll="following")
    assert bad.value.field == "roll"
    assert (await again.schedules.get("month-end")).to_dict()["roll"] == "modified_backward"


async def test_rules_are_checked_off_the_event_loop(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checking a rule may take tens of milliseconds (bounded by its expansion budget): a
    batch of distinct rules, or an update, must not hold the event loop other tenants share,
    nor the store's transaction, while it does."""
    loop_thread = threading.get_ident()
    threads: list[int] = []
    expand = duetime.schedules.next_after  # every check of a rule finds its next occurrence

    def next_after(*args: Any, **options: Any) -> datetime | None:
        threads.append(threading.get_ident())
        return expand(*args, **options)

    monkeypatch.setattr(duetime.schedules, "next_after", next_after)
    start = datetime(2027, 1, 4, tzinfo=UTC)
    app = app_on(store, FrozenClock(start))
    requests = [
        ScheduleRequest(name=f"s{hour}", type="t", rrule=f"FREQ=DAILY;BYHOUR={hour}",
                        dtstart="2027-01-04T00:00", start_at=start)  # start_at: not shared
        for hour in (6, 7, 8)
    ]  # fmt: skip
    await app.schedules.add_many(requests)
    await app.schedules.update("s6", rrule="FREQ=DAILY;BYHOUR=9")
    assert len(threads) >= 4
    assert loop_thread not in threads
