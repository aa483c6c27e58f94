"""The materialiser on each backend, with a frozen clock: every occurrence exactly once.

DST days, catch-up after an outage, pause/resume, updates, delete, and two materialisers
racing over the same schedules (as two processes would: two stores on one database).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

import pytest
from storekit import StoreFactory

from duetime import AsyncApp, FrozenClock
from duetime.model import Status, Timer, TimerFilter
from duetime.model.schedules import NewSchedule
from duetime.schedules import occurrence_key, recurrence_of
from duetime.services.materializer import Materializer
from duetime.store import Store
from duetime.timemath.recurrence import Recurrence, occurrences_between
from duetime.timemath.recurrence.calendar import Calendar

MINUTE = timedelta(minutes=1)
HOUR = timedelta(hours=1)
START = datetime(2025, 3, 8, 12, 0, tzinfo=UTC)


def app_on(store: Store, clock: FrozenClock) -> AsyncApp:
    return AsyncApp(store.url, "ns", clock=clock, store=store)


def materializer(app: AsyncApp, **options: object) -> Materializer:
    options.setdefault("check_tzdata", False)
    return app.schedules.materializer(**options)


async def all_timers(app: AsyncApp) -> list[Timer]:
    timers: list[Timer] = []
    cursor = None
    while True:
        page = await app.store.list_timers("ns", TimerFilter(), cursor, 1000)
        timers += page.items
        cursor = page.next_cursor
        if cursor is None:
            return sorted(timers, key=lambda t: (t.due_at, t.key))


async def run_clock(
    clock: FrozenClock, until: datetime, step: timedelta, tick: Callable[[], Awaitable[object]]
) -> None:
    while clock.now() < until:
        clock.advance(step)
        await tick()


@pytest.mark.parametrize(
    ("cron", "gap_day"),
    [
        ("30 2 * * *", "spring"),  # fixed-time: the gap's match runs right after it
        ("*/30 * * * *", "spring"),  # wildcard: keeps its real-time rhythm
        ("30 1 * * *", "fall"),  # fixed-time: a repeated hour fires once
        ("15,45 1 * * *", "fall"),
    ],
)
async def test_every_occurrence_exactly_once_across_dst(
    store: Store, cron: str, gap_day: str
) -> None:
    start = START if gap_day == "spring" else datetime(2025, 11, 1, 12, 0, tzinfo=UTC)
    clock = FrozenClock(start)
    app = app_on(store, clock)
    _, schedule = await app.schedules.add("s", "t", cron=cron, timezone="America/New_York")
    worker = materializer(app)
    end = start + timedelta(days=2)
    await run_clock(clock, end, timedelta(minutes=7), lambda: worker.tick(clock.now()))
    timers = await all_timers(app)
    horizon = end + worker.lookahead
    expected = list(occurrences_between(recurrence_of(schedule), start, horizon))
    assert [t.due_at for t in timers] == expected
    assert [t.key for t in timers] == [occurrence_key("s", at) for at in expected]
    assert {(t.type, t.status) for t in timers} == {("t", Status.SCHEDULED)}
    if cron == "30 2 * * *":
        assert datetime(2025, 3, 9, 7, 0, tzinfo=UTC) in expected  # 03:00 EDT, after the gap


async def test_timers_exist_ahead_of_time_and_carry_the_schedule(store: Store) -> None:
    clock = FrozenClock(START)
    app = app_on(store, clock)
    await app.schedules.add(
        "greet:u1", "greet", {"hi": 1}, every="PT2S", subject="u1", max_attempts=4
    )
    worker = materializer(app, lookahead=timedelta(seconds=5))
    assert await worker.tick(clock.now()) == 3  # :01, :03, :05
    timers = await all_timers(app)
    assert [t.key for t in timers] == [
        "schedule:greet:u1:2025-03-08T12:00:01Z",
        "schedule:greet:u1:2025-03-08T12:00:03Z",
        "schedule:greet:u1:2025-03-08T12:00:05Z",
    ]
    first = timers[0]
    assert (first.type, first.payload, first.subject, first.max_attempts) == (
        "greet",
        {"hi": 1},
        "u1",
        4,
    )
    assert await worker.tick(clock.now()) == 0  # nothing new until the clock moves
    clock.advance(timedelta(seconds=2))
    assert await worker.tick(clock.now()) == 1


@pytest.mark.parametrize(
    ("policy", "overdue"),
    [
        ("latest", ["13:50"]),
        ("all", ["13:00", "13:10", "13:20", "13:30", "13:40", "13:50"]),
        ("none", []),
    ],
)
async def test_catch_up_after_an_outage(store: Store, policy: str, overdue: list[str]) -> None:
    clock = FrozenClock(datetime(2025, 3, 8, 12, 55, tzinfo=UTC))
    app = app_on(store, clock)
    await app.schedules.add("s", "t", cron="*/10 * * * *", catch_up=policy)
    worker = materializer(app)
    assert await worker.tick(clock.now()) == 0
    clock.set(datetime(2025, 3, 8, 13, 59, 57, tzinfo=UTC))  # down for an hour
    await worker.tick(clock.now())
    fired = [t.due_at.strftime("%H:%M") for t in await all_timers(app)]
    assert fired == [*overdue, "14:00"]  # 14:00 is within the lookahead: on time
    schedule = await app.schedules.get("s")
    assert schedule.next_at == datetime(2025, 3, 8, 14, 10, tzinfo=UTC)


async def test_a_little_late_is_not_an_outage(store: Store) -> None:
    clock = FrozenClock(datetime(2025, 3, 8, 12, 55, tzinfo=UTC))
    app = app_on(store, clock)
    await app.schedules.add("s", "t", cron="* * * * *", catch_up="none", catch_up_grace=120)
    worker = materializer(app)
    clock.set(datetime(2025, 3, 8, 12, 57, 30, tzinfo=UTC))  # 12:56 and 12:57 are late
    await worker.tick(clock.now())
    fired = [t.due_at.strftime("%H:%M") for t in await all_timers(app)]
    assert fired == ["12:56", "12:57"]


async def test_all_catches_up_in_capped_batches(store: Store) -> None:
    clock = FrozenClock(START)
    app = app_on(store, clock)
    await app.schedules.add("s", "t", every=60, catch_up="all")
    worker = materializer(app, per_schedule=7)
    clock.advance(timedelta(minutes=50, seconds=30))
    assert await worker.tick(clock.now()) == 51  # 12:00:01 .. 12:50:01
    schedule = await app.schedules.get("s")
    assert schedule.next_at == START + timedelta(minutes=51, seconds=1)


async def test_pause_withdraws_early_timers_and_resume_skips_the_pause(store: Store) -> None:
    clock = FrozenClock(START)
    app = app_on(store, clock)
    await app.schedules.add("s", "t", every=10)
    worker = materializer(app, lookahead=timedelta(seconds=30))
    assert await worker.tick(clock.now()) == 3  # :01 :11 :21
    clock.advance(timedelta(seconds=5))
    paused = await app.schedules.pause("s")
    assert not paused.active
    assert [t.key[-9:] for t in await all_timers(app)] == ["12:00:01Z"]  # the fired one stays
    clock.advance(HOUR)
    assert await worker.tick(clock.now()) == 0
    resumed = await app.schedules.resume("s")
    assert resumed.next_at == datetime(2025, 3, 8, 13, 0, 11, tzinfo=UTC)
    assert await worker.tick(clock.now()) == 3
    again = await app.schedules.resume("s")
    assert again.version == resumed.version + 1  # the materialiser moved it; no change
    assert [t.due_at for t in await all_timers(app)][1:] == [
        datetime(2025, 3, 8, 13, 0, s, tzinfo=UTC) for s in (11, 21, 31)
    ]


async def test_an_update_recomputes_and_remakes_early_timers(store: Store) -> None:
    clock = FrozenClock(START)
    app = app_on(store, clock)
    await app.schedules.add("s", "t", {"v": 1}, every=10)
    worker = materializer(app, lookahead=timedelta(seconds=25))
    await worker.tick(clock.now())  # :01 :11 :21
    clock.advance(timedelta(seconds=5))
    action, _ = await app.schedules.add("s", "t", {"v": 2}, every=10)
    assert action == "updated"
    await worker.tick(clock.now())
    timers = await all_timers(app)
    assert [(t.due_at.second, t.payload) for t in timers] == [
        (1, {"v": 1}),
        (11, {"v": 2}),
        (21, {"v": 2}),
    ]
    changed = await app.schedules.update("s", cron="0 13 * * *", timezone="Europe/Paris")
    assert changed.next_at == datetime(2025, 3, 9, 12, 0, tzinfo=UTC)
    assert [t.due_at.second for t in await all_timers(app)] == [1]
    assert (changed.cron, changed.every) == ("0 13 * * *", None)


async def test_delete_cancels_the_pending_occurrence(store: Store) -> None:
    clock = FrozenClock(START)
    app = app_on(store, clock)
    await app.schedules.add("s", "t", every=3600)
    worker = materializer(app)
    assert await worker.tick(clock.now()) == 1
    _schedule, cancelled = await app.schedules.delete("s")
    assert cancelled == 1
    (timer,) = await all_timers(app)
    assert timer.status is Status.CANCELLED
    clock.advance(2 * HOUR)
    assert await worker.tick(clock.now()) == 0


async def test_a_schedule_ends(store: Store) -> None:
    clock = FrozenClock(START)
    app = app_on(store, clock)
    await app.schedules.add("s", "t", every=60, start_at=START, end_at=START + 2 * MINUTE)
    worker = materializer(app)
    clock.advance(HOUR)
    await worker.tick(clock.now())
    assert len(await all_timers(app)) == 1  # catch_up=latest
    assert (await app.schedules.get("s")).next_at is None
    assert await worker.tick(clock.now() + HOUR) == 0


async def test_racing_materializers_never_duplicate(store: Store, make_store: StoreFactory) -> None:
    clock = FrozenClock(START)
    app = app_on(store, clock)
    names = [f"user-{i}" for i in range(40)]
    for i, name in enumerate(names):
        await app.schedules.add(name, "t", cron=f"{i % 5}-59/5 * * * *")
    others = [app_on(await make_store(), clock) for _ in range(2)]
    workers = [materializer(a, batch_size=7) for a in [app, *others]]
    end = START + HOUR

    async def tick_all() -> None:
        await asyncio.gather(*(w.tick(clock.now()) for w in workers))

    await run_clock(clock, end, timedelta(seconds=50), tick_all)
    timers = await all_timers(app)
    assert len({t.key for t in timers}) == len(timers)
    assert sum(w.created for w in workers) == len(timers)
    horizon = end + workers[0].lookahead
    expected = 0
    for name in names:
        rule = recurrence_of(await app.schedules.get(name))
        expected += len(list(occurrences_between(rule, START, horizon)))
    assert len(timers) == expected == 40 * 12


async def test_stale_plans_lose_the_race(store: Store, make_store: StoreFactory) -> None:
    clock = FrozenClock(START)
    app = app_on(store, clock)
    await app.schedules.add("s", "t", every=60)
    other = app_on(await make_store(), clock)
    one, two = materializer(app), materializer(other)
    due = await app.store.schedules.due_schedules("ns", clock.now() + one.lookahead, 10)
    plan_one = one.plan(due, clock.now())
    plan_two = two.plan(due, clock.now())
    assert await app.store.schedules.advance_schedules(plan_one, clock.now()) == [due[0].id]
    assert await other.store.schedules.advance_schedules(plan_two, clock.now()) == []
    assert len(await all_timers(app)) == 1


@pytest.mark.timeout(60)
async def test_a_rule_too_costly_to_expand_stops_alone(store: Store) -> None:
    """A rule stored before rules had an expansion budget (a per-second rule on 29 February:
    dateutil walks every second of every day in between) stops with the reason logged; the
    round goes on, and the other schedules get their timers."""
    clock = FrozenClock(START)
    app = app_on(store, clock)
    await app.schedules.add("fine", "t", cron="* * * * *")
    calendar = Calendar.from_text(
        '{"rrule":"FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=29;BYHOUR=23","dtstart":"2025-01-01T00:00:00"}'
    )
    costly = NewSchedule(
        namespace="ns",
        name="costly",
        type="t",
        payload=None,
        subject=None,
        recurrence=Recurrence(None, None, "UTC", calendar=calendar),
        catch_up="latest",
        active=True,
        max_attempts=3,
        anchor_at=START,
        after_at=START,
        next_at=START + MINUTE,  # due: its next one must be found
    )
    await store.schedules.put_schedules([costly], "error", START)
    worker = materializer(app)
    clock.advance(2 * MINUTE)
    assert await worker.tick(clock.now()) > 0
    assert (await app.schedules.get("costly")).next_at is None
    assert (await app.schedules.get("fine")).next_at is not None
    assert {t.key.split(":")[1] for t in await all_timers(app)} == {"fine"}
    assert await worker.tick(clock.now() + HOUR) > 0  # and the next rounds go on
