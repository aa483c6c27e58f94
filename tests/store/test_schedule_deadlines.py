"""Schedule deadlines on each backend, with a frozen clock moved past each deadline (never a
sleep): every kind of miss found once, with one event; restarts and racing watches; the pause
after failures in a row, audited, with its event, until resumed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from storekit import StoreFactory

from duetime import AsyncApp, FrozenClock
from duetime.errors import InvalidInput
from duetime.model import Finish, Outcome, Schedule, Status, Timer, TimerFilter
from duetime.model.deadlines import (
    MISSED_EVENT,
    PAUSED_EVENT,
    Miss,
    ScheduleWatch,
    WatchStep,
)
from duetime.observability.metrics import Metrics
from duetime.schedules import occurrence_key
from duetime.store import Store

START = datetime(2025, 3, 8, 12, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


def app_on(store: Store, clock: FrozenClock) -> AsyncApp:
    return AsyncApp(store.url, "ns", clock=clock, store=store)


async def timers_of(app: AsyncApp, type: str) -> list[Timer]:
    page = await app.store.list_timers("ns", TimerFilter(type=type), None, 1000)
    return sorted(page.items, key=lambda t: t.key)


async def materialize(app: AsyncApp) -> None:
    await app.schedules.materializer(check_tzdata=False).tick(app.clock.now())


async def run_due(app: AsyncApp, outcome: Outcome, *, only: int | None = None) -> list[Timer]:
    """Materialise, claim the due occurrences (type ``t``) and end ``only`` of them (all:
    None) so."""
    await materialize(app)
    now = app.clock.now()
    claimed = await app.store.claim_due("ns", ["t"], now, 100, "n1", now + MINUTE)
    ended = claimed if only is None else claimed[:only]
    finishes = [Finish(c.timer.id, c.timer.attempts, outcome, error="boom") for c in ended]
    await app.store.finish(finishes, "n1", now)
    return [c.timer for c in claimed]


async def test_an_occurrence_done_in_time_is_no_miss(store: Store) -> None:
    clock = FrozenClock(START)
    app = app_on(store, clock)
    await app.schedules.add("s", "t", cron="*/10 * * * *", must_succeed_within="PT5M")
    clock.advance(9 * MINUTE)
    await materialize(app)
    clock.advance(MINUTE)  # 12:10, the occurrence is due
    await run_due(app, Outcome.DONE)
    clock.advance(6 * MINUTE)  # past its deadline (12:15)
    watch = app.schedules.deadline_watch()
    assert (await watch.tick()).missed == 0
    schedule = await app.schedules.get("s")
    assert schedule.watch is not None
    assert (schedule.watch.misses, schedule.watch.last_success_at) == (0, START + 10 * MINUTE)
    assert await timers_of(app, MISSED_EVENT) == []


async def test_a_dead_occurrence_is_missed_once_with_one_event(store: Store) -> None:
    clock = FrozenClock(START + 9 * MINUTE)
    app = app_on(store, clock)
    await app.schedules.add("s", "t", cron="*/10 * * * *", must_succeed_within=300)
    await materialize(app)
    clock.advance(MINUTE)
    await run_due(app, Outcome.DEAD)
    watch = app.schedules.deadline_watch()
    assert (await watch.tick()).missed == 0  # dead, but its deadline is still to come
    clock.advance(5 * MINUTE)
    assert (await watch.tick()).missed == 1
    assert (await watch.tick()).missed == 0
    (event,) = await timers_of(app, MISSED_EVENT)
    assert event.key == "schedule.missed:s:2025-03-08T12:10:00Z"
    assert event.payload == {
        "schedule": "s",
        "nominal_at": "2025-03-08T12:10:00Z",
        "deadline_at": "2025-03-08T12:15:00Z",
        "reason": "dead",
        "must_succeed_within": 300.0,
        "pause_after_failures": None,
    }
    assert event.status is Status.SCHEDULED
    assert event.due_at == clock.now()
    (miss,) = await app.schedules.misses("s")
    assert (miss.reason, miss.nominal_at) == ("dead", START + 10 * MINUTE)


@pytest.mark.parametrize(
    ("outcome", "reason"),
    [(Outcome.RETRY, "retrying"), (None, "still_running")],
)
async def test_an_occurrence_still_at_work_past_its_deadline_is_missed(
    store: Store, outcome: Outcome | None, reason: str
) -> None:
    clock = FrozenClock(START + 9 * MINUTE)
    app = app_on(store, clock)
    await app.schedules.add("s", "t", cron="*/10 * * * *", must_succeed_within="PT2M")
    clock.advance(MINUTE)
    await materialize(app)
    now = clock.now()
    (claimed,) = await app.store.claim_due("ns", ["t"], now, 10, "n1", now + 10 * MINUTE)
    if outcome is not None:
        later = now + 10 * MINUTE
        retry = Finish(claimed.timer.id, claimed.timer.attempts, outcome, "x", run_at=later)
        await app.store.finish([retry], "n1", now)
    clock.advance(3 * MINUTE)
    await app.schedules.deadline_watch().tick()
    (miss,) = await app.schedules.misses()
    assert miss.reason == reason


async def test_occurrences_never_made_are_found_after_a_restart(
    store: Store, make_store: StoreFactory
) -> None:
    clock = FrozenClock(START)
    app = app_on(store, clock)
    await app.schedules.add("s", "t", cron="*/10 * * * *", must_succeed_within="PT1M")
    watch = app.schedules.deadline_watch()
    clock.advance(15 * MINUTE)  # 12:10's deadline passes; no materialiser ran
    assert (await watch.tick()).missed == 1
    clock.advance(30 * MINUTE)  # everything down meanwhile: 12:20, 12:30, 12:40
    restarted = app_on(await make_store(), clock)
    assert (await restarted.schedules.deadline_watch().tick()).missed == 3
    reasons = [m.reason for m in await restarted.schedules.misses("s")]
    assert reasons == ["not_created"] * 4
    assert len(await timers_of(restarted, MISSED_EVENT)) == 4
    shown = await restarted.schedules.get("s")
    assert shown.watch is not None
    assert shown.watch.misses == 4
    assert shown.to_dict()["deadline"]["last_miss_reason"] == "not_created"


async def test_skipped_and_dropped_occurrences_are_missed(store: Store) -> None:
    clock = FrozenClock(START + 9 * MINUTE)
    app = app_on(store, clock)
    await app.schedules.add(
        "s", "t", every="PT5M", start_at=START, overlap="skip", must_succeed_within="PT1M"
    )
    clock.advance(MINUTE)  # 12:10 runs and keeps running
    await materialize(app)
    now = clock.now()
    await app.store.claim_due("ns", ["t"], now, 10, "n1", now + 30 * MINUTE)
    clock.advance(5 * MINUTE)  # 12:15 falls due behind it: skipped
    await materialize(app)
    clock.set(START + 60 * MINUTE)  # an outage: catch-up drops all but the latest
    await materialize(app)
    await app.schedules.deadline_watch().tick()
    reasons = {m.nominal_at.strftime("%H:%M"): m.reason for m in await app.schedules.misses()}
    assert reasons["12:10"] == "still_running"
    assert reasons["12:15"] == "skipped_overlap"
    assert reasons["12:30"] == "dropped_catch_up"


async def test_racing_watches_raise_each_event_once(store: Store, make_store: StoreFactory) -> None:
    clock = FrozenClock(START)
    app = app_on(store, clock)
    for n in range(5):
        await app.schedules.add(f"s{n}", "t", every=60, must_succeed_within="PT30S")
    other = app_on(await make_store(), clock)
    clock.advance(10 * MINUTE)
    one, two = app.schedules.deadline_watch(), other.schedules.deadline_watch()
    first, second = await one.tick(), await two.tick()
    assert first.missed == 5 * 10
    assert (second.missed, second.judged) == (0, 0)
    planned = await app.store.deadlines.watched("ns", 0, 10)
    stale = [_replan(schedule, clock.now()) for schedule in planned]
    # Rounds that read before the first one wrote: fenced, they write nothing.
    assert await other.store.deadlines.record(stale, clock.now()) == [None] * 5
    assert len(await timers_of(app, MISSED_EVENT)) == 5 * 10


def _replan(schedule: Schedule, now: datetime) -> WatchStep:
    """A step planned from before the schedule was first watched."""
    return WatchStep(
        schedule_id=schedule.id,
        namespace="ns",
        name=schedule.name,
        since=None,
        watch=ScheduleWatch(checked_through=now, misses=1),
        misses=(Miss(START + MINUTE, "not_created", START + 2 * MINUTE),),
    )


async def test_failures_in_a_row_pause_the_schedule_until_resumed(store: Store) -> None:
    clock = FrozenClock(START + 9 * MINUTE)
    app = app_on(store, clock)
    await app.schedules.add(
        "s", "t", cron="*/10 * * * *", must_succeed_within="PT5M", pause_after_failures=2
    )
    watch = app.schedules.deadline_watch()
    await materialize(app)
    clock.advance(MINUTE)
    await run_due(app, Outcome.DEAD)  # 12:10 fails
    clock.advance(10 * MINUTE)
    await materialize(app)
    await run_due(app, Outcome.DONE)  # 12:20 succeeds: the count starts again
    clock.advance(10 * MINUTE)
    await materialize(app)
    await run_due(app, Outcome.DEAD)  # 12:30 fails
    clock.advance(10 * MINUTE)
    await materialize(app)
    assert (await watch.tick()).paused == 0  # 12:10 missed, 12:20 done, 12:30 missed
    await run_due(app, Outcome.DEAD)  # 12:40 fails: two in a row
    clock.advance(6 * MINUTE)
    assert (await watch.tick()).paused == 1
    paused = await app.schedules.get("s")
    assert not paused.active
    assert paused.watch is not None
    assert paused.watch.failures_in_row == 2
    (event,) = await timers_of(app, PAUSED_EVENT)
    assert event.payload["failures_in_row"] == 2
    entries = (await app.store.audit.list_entries("ns", None, 10)).items
    pause = next(e for e in entries if e.action == "schedule_pause")
    assert pause.actor == "python:duetime-watch"
    assert pause.target == {"schedule": "s", "reason": "failures_in_row", "failures_in_row": 2}
    clock.advance(60 * MINUTE)  # paused: nothing is judged meanwhile
    assert (await watch.tick()).missed == 0
    resumed = await app.schedules.resume("s")
    assert resumed.watched_from == clock.now()
    await materialize(app)
    clock.advance(10 * MINUTE)
    await run_due(app, Outcome.DEAD)
    clock.advance(6 * MINUTE)
    done = await watch.tick()
    assert (done.missed, done.paused) == (1, 0)  # counted afresh since the resume
    after = await app.schedules.get("s")
    assert after.active
    assert after.watch is not None
    assert after.watch.failures_in_row == 1


async def test_dead_occurrences_pause_a_schedule_without_a_deadline(store: Store) -> None:
    clock = FrozenClock(START + 9 * MINUTE)
    app = app_on(store, clock)
    await app.schedules.add("s", "t", cron="*/10 * * * *", pause_after_failures=1)
    await materialize(app)
    clock.advance(MINUTE)
    await run_due(app, Outcome.DEAD)
    done = await app.schedules.deadline_watch().tick()
    assert (done.missed, done.paused) == (0, 1)  # no deadline: no miss, but a failure
    assert not (await app.schedules.get("s")).active


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"must_succeed_within": "PT0.5S"}, "must_succeed_within", "at least 1 second"),
        ({"must_succeed_within": "soon"}, "must_succeed_within", "ISO 8601"),
        ({"must_succeed_within": -5}, "must_succeed_within", "negative"),
        ({"must_succeed_within": True}, "must_succeed_within", "ISO 8601"),
        ({"pause_after_failures": 0}, "pause_after_failures", "from 1"),
        ({"pause_after_failures": "3"}, "pause_after_failures", "positive whole number"),
        ({"pause_after_failures": 2.5}, "pause_after_failures", "positive whole number"),
    ],
)
async def test_bad_settings_are_refused_naming_the_field(
    store: Store, fields: dict[str, object], field: str, words: str
) -> None:
    app = app_on(store, FrozenClock(START))
    with pytest.raises(InvalidInput) as caught:
        await app.schedules.add("s", "t", every=60, **fields)  # type: ignore[arg-type]
    assert caught.value.field == field
    assert words in caught.value.message


async def test_a_deadline_is_kept_changed_and_cleared(store: Store) -> None:
    clock = FrozenClock(START)
    app = app_on(store, clock)
    _, added = await app.schedules.add("s", "t", every=60, must_succeed_within="PT30M")
    assert added.must_succeed_within == timedelta(minutes=30)
    assert added.to_dict()["must_succeed_within"] == 1800.0
    clock.advance(MINUTE)
    changed = await app.schedules.update("s", pause_after_failures=3)
    assert (changed.must_succeed_within, changed.pause_after_failures) == (
        timedelta(minutes=30),
        3,
    )
    assert changed.watched_from == clock.now()  # newly watched for failures: from now
    cleared = await app.schedules.update("s", must_succeed_within=None)
    assert cleared.must_succeed_within is None
    assert (await app.schedules.get("s")).pause_after_failures == 3
    assert occurrence_key("s", START) == "schedule:s:2025-03-08T12:00:00Z"


async def test_metrics_count_misses_and_the_time_since_the_latest_success(store: Store) -> None:
    clock = FrozenClock(START + 9 * MINUTE)
    app = app_on(store, clock)
    await app.schedules.add("s", "t", cron="*/10 * * * *", must_succeed_within="PT5M")
    clock.advance(MINUTE)
    await run_due(app, Outcome.DONE)  # 12:10 done at 12:10
    clock.advance(20 * MINUTE)  # 12:20 never ran; 12:30 still within its deadline
    await app.schedules.deadline_watch().tick()
    metrics = Metrics()
    metrics.schedule_watch.update(await store.deadlines.successes(), clock.now())
    text = metrics.render().decode()
    assert 'duetime_schedule_missed_total{namespace="ns",schedule="s"} 1.0' in text
    since = 'duetime_schedule_since_success_seconds{namespace="ns",schedule="s"} 1200.0'
    assert since in text
