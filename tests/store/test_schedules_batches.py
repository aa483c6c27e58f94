"""Materialising and adding schedules in batches (set-based statements), on each backend.

A batch mixes zones, DST edges and intervals; a batch that fails part way leaves nothing
behind and is made again exactly once; schedules paused or deleted after a batch was planned
are not materialised; the timers take type, payload, subject and max_attempts from their
schedule's row; ``add_schedules`` returns what the store holds.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from test_schedules_materializer import all_timers

from duetime import AsyncApp, FrozenClock
from duetime.errors import AlreadyExists, InvalidInput
from duetime.model.schedules import DueSchedule, OccurrenceState, ScheduleAdvance
from duetime.schedules import ScheduleRequest, occurrence_key, recurrence_of
from duetime.services.materializer import Materializer
from duetime.store import Store
from duetime.store.postgres import schedules as pg_schedules
from duetime.timemath.recurrence import occurrences_between

START = datetime(2025, 3, 8, 12, 0, tzinfo=UTC)  # the US springs forward on the 9th
ZONES = ("America/New_York", "Europe/London", "Australia/Sydney", "Asia/Kathmandu", "UTC")
CRONS = ("30 2 * * *", "0 1 * * *", "*/45 * * * *", "15 9 * * *")


def app_on(store: Store, clock: FrozenClock) -> AsyncApp:
    return AsyncApp(store.url, "ns", clock=clock, store=store)


def materializer(app: AsyncApp, batch_size: int = 7) -> Materializer:
    return app.schedules.materializer(check_tzdata=False, batch_size=batch_size)


def mixed(count: int) -> list[ScheduleRequest]:
    """Crons across zones (DST edges among them) and a few intervals, each its own payload."""
    requests = []
    for n in range(count):
        fields: dict[str, object] = (
            {"every": 3600 + 60 * n}
            if n % 6 == 5
            else {"cron": CRONS[n % len(CRONS)], "timezone": ZONES[n % len(ZONES)]}
        )
        requests.append(
            ScheduleRequest(
                name=f"user-{n}",
                type=f"t.{n % 3}",
                payload={"user": n, "nested": ["ü", n / 2]},
                subject=f"s-{n}",
                max_attempts=1 + n % 4,
                catch_up="all",
                **fields,  # type: ignore[arg-type]
            )
        )
    return requests


async def expected_keys(app: AsyncApp, until: datetime, lookahead: timedelta) -> Counter[str]:
    keys: Counter[str] = Counter()
    cursor = None
    while True:
        page = await app.schedules.list(cursor=cursor, limit=100)
        for schedule in page.items:
            rule = recurrence_of(schedule)
            for instant in occurrences_between(rule, START, until + lookahead):
                keys[occurrence_key(schedule.name, instant)] += 1
        cursor = page.next_cursor
        if cursor is None:
            return keys


async def test_a_batch_mixing_zones_and_dst_edges_makes_every_occurrence_once(
    store: Store,
) -> None:
    clock = FrozenClock(START)
    app = app_on(store, clock)
    await app.schedules.add_many(mixed(40))
    worker = materializer(app)
    until = START + timedelta(days=3)
    while clock.now() < until:
        clock.advance(timedelta(minutes=20))
        await worker.tick(clock.now())
    timers = await all_timers(app)
    made = Counter(t.key for t in timers)
    assert made == await expected_keys(app, until, worker.lookahead)
    # New York's 02:30 falls in the gap on the 9th: it runs at 03:00 EDT.
    assert made["schedule:user-0:2025-03-09T07:00:00Z"] == 1
    by_name = {s.name: s for s in (await app.schedules.list(limit=100)).items}
    for timer in timers:
        schedule = by_name[timer.key.split(":")[1]]
        assert (timer.type, timer.payload, timer.subject) == (
            schedule.type,
            schedule.payload,
            schedule.subject,
        )
        assert timer.max_attempts == schedule.max_attempts
        assert timer.status == "scheduled"
    # Each timer is linked to its schedule: deleting it cancels them all.
    _, cancelled = await app.schedules.delete("user-0")
    assert cancelled == sum(1 for key in made if key.startswith("schedule:user-0:")) > 1


async def test_a_batch_that_fails_part_way_is_made_again_exactly_once(store: Store) -> None:
    clock = FrozenClock(START)
    app = app_on(store, clock)
    await app.schedules.add_many(mixed(30))
    clock.advance(timedelta(days=1, hours=1))
    worker = materializer(app, batch_size=8)
    first = await store.schedules.materialize(
        "ns", clock.now(), 8, lambda due, states: worker.plan(due, clock.now(), states), clock.now()
    )
    assert first.advanced == 8
    made_before = Counter(t.key for t in await all_timers(app))

    def crash(due: list[DueSchedule], states: dict[int, OccurrenceState]) -> list[ScheduleAdvance]:
        raise RuntimeError("the process dies while planning its second batch")

    with pytest.raises(RuntimeError):
        await store.schedules.materialize("ns", clock.now(), 8, crash, clock.now())  # type: ignore[arg-type]
    assert Counter(t.key for t in await all_timers(app)) == made_before

    # Another process made one occurrence's timer meanwhile (as if a batch had run twice).
    due = await store.schedules.due_schedules("ns", clock.now(), 100)
    lone = worker.plan([due[0]], clock.now())
    assert await store.schedules.advance_schedules(lone, clock.now()) == [due[0].id]
    await store.schedules.save_schedule(
        (await app.schedules.get(due[0].name)), clock.now(), None
    )  # its row moves on by a version: the next plan is made afresh, keys stay the same

    await materializer(app, batch_size=8).tick(clock.now())
    made = Counter(t.key for t in await all_timers(app))
    assert set(made.values()) == {1}
    clock.advance(timedelta(days=2))
    await materializer(app, batch_size=8).tick(clock.now())
    made = Counter(t.key for t in await all_timers(app))
    assert set(made.values()) == {1}
    assert made == await expected_keys(app, clock.now(), worker.lookahead)


async def test_schedules_paused_or_deleted_after_planning_are_not_materialised(
    store: Store,
) -> None:
    clock = FrozenClock(START)
    app = app_on(store, clock)
    await app.schedules.add_many(
        ScheduleRequest(name=name, type="t", every=60) for name in ("keep", "pause", "delete")
    )
    clock.advance(timedelta(minutes=2))
    worker = materializer(app)
    due = await store.schedules.due_schedules("ns", clock.now() + worker.lookahead, 10)
    plan = worker.plan(due, clock.now())
    assert all(advance.timers for advance in plan)
    await app.schedules.pause("pause")
    await app.schedules.delete("delete")
    advanced = await store.schedules.advance_schedules(plan, clock.now())
    assert advanced == [s.id for s in due if s.name == "keep"]
    names = {t.key.split(":")[1] for t in await all_timers(app)}
    assert names == {"keep"}
    await worker.tick(clock.now())
    assert {t.key.split(":")[1] for t in await all_timers(app)} == {"keep"}


async def test_add_schedules_in_a_batch_returns_what_is_stored(store: Store) -> None:
    clock = FrozenClock(START)
    app = app_on(store, clock)
    await app.schedules.add("taken", "t.old", every=60)
    requests = [*mixed(12), ScheduleRequest(name="taken", type="t.new", every=60)]
    requests.append(ScheduleRequest(name="user-3", type="t.twice", every=90))
    results = await app.schedules.add_many(requests, on_conflict="keep")
    assert [action for action, _ in results] == ["created"] * 12 + ["kept", "kept"]
    for _, schedule in results:
        assert schedule == await app.schedules.get(schedule.name)
    assert results[-2][1].type == "t.old"
    assert results[-1][1].type == "t.0"  # a name given twice: the first is stored
    ids = [schedule.id for _, schedule in results[:12]]
    assert ids == sorted(ids)
    with pytest.raises(AlreadyExists):
        await store.schedules.put_schedules(
            [
                ScheduleRequest(name=name, type="t", every=60).resolve("ns", START, 3, 1024)
                for name in ("new", "taken")
            ],
            "error",
            START,
        )
    assert [s.name for s in (await app.schedules.list(limit=100)).items if s.name == "new"] == []


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """PostgreSQL sends a batch of schedules in chunks: four a statement here, so a dozen
    spans three."""
    monkeypatch.setattr(pg_schedules, "PUT_SCHEDULES_CHUNK", 4)


@pytest.mark.usefixtures("small_chunks")
async def test_a_batch_across_chunks_is_stored_as_one(store: Store) -> None:
    clock = FrozenClock(START)
    app = app_on(store, clock)
    await app.schedules.add("user-9", "t.old", every=60)
    requests = [*mixed(12), ScheduleRequest(name="user-1", type="t.twice", every=90)]
    results = await app.schedules.add_many(requests, on_conflict="keep")
    assert [action for action, _ in results] == ["created"] * 9 + ["kept"] + ["created"] * 2 + [
        "kept"
    ]
    assert results[9][1].type == "t.old"
    assert results[-1][1] == results[1][1]  # a name given twice, chunks apart: the first
    for _, schedule in results:
        assert schedule == await app.schedules.get(schedule.name)
    ids = [schedule.id for action, schedule in results if action == "created"]
    assert ids == sorted(ids)


@pytest.mark.usefixtures("small_chunks")
async def test_a_batch_refused_in_a_later_chunk_stores_nothing(store: Store) -> None:
    app = app_on(store, FrozenClock(START))
    await app.schedules.add("taken", "t", every=60)
    bad = [*mixed(10), ScheduleRequest(name="late", type="t", cron="61 * * * *")]
    with pytest.raises(InvalidInput) as refused:
        await app.schedules.add_many(bad)
    assert refused.value.field == "[10].cron"
    taken = [*mixed(10), ScheduleRequest(name="taken", type="t", every=30)]
    with pytest.raises(AlreadyExists):
        await app.schedules.add_many(taken, on_conflict="error")
    assert [s.name for s in (await app.schedules.list(limit=100)).items] == ["taken"]
