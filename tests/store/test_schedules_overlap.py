"""Overlap policies and the catch-up grace on each backend, with a frozen clock.

An occurrence due while an earlier one is unfinished (scheduled, running or waiting for a
retry): ``allow`` fires it, ``skip`` records it skipped with the reason, ``buffer_one`` parks it
until the earlier one ends (whatever ends it), at most one. The materialiser decides under the
schedule row's lock; the store's trigger releases the buffered one.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from storekit import wait_until

from duetime import AsyncApp, FrozenClock
from duetime.model import Finish, Outcome, Status, Timer
from duetime.model.schedules import PARKED
from duetime.schedules import occurrence_key
from duetime.services.materializer import Materializer
from duetime.store import Store
from duetime.timemath.recurrence.overlap import (
    BUFFERED,
    SKIPPED_BUFFER_FULL,
    SKIPPED_RUNNING,
    waiting,
)

MINUTE = timedelta(minutes=1)
START = datetime(2025, 3, 8, 12, 0, tzinfo=UTC)
LEASE = timedelta(minutes=30)


def app_on(store: Store, clock: FrozenClock) -> AsyncApp:
    return AsyncApp(store.url, "ns", clock=clock, store=store)


def materializer(app: AsyncApp) -> Materializer:
    return app.schedules.materializer(check_tzdata=False, lookahead=timedelta(seconds=5))


async def every_minute(store: Store, **options: Any) -> tuple[AsyncApp, FrozenClock, Materializer]:
    """Schedule "s", every minute from START (with ``options``), and its materialiser."""
    clock = FrozenClock(START)
    app = app_on(store, clock)
    await app.schedules.add("s", "t", cron="* * * * *", **options)
    return app, clock, materializer(app)


async def running_at_two(
    store: Store, **options: Any
) -> tuple[AsyncApp, FrozenClock, Materializer, Timer]:
    """As :func:`every_minute`; its 12:01 occurrence claimed (running) and the clock at 12:02,
    materialised."""
    app, clock, worker = await every_minute(store, **options)
    await at_minute(app, clock, worker, 1)
    (first,) = await claim(app, clock)
    await at_minute(app, clock, worker, 2)
    return app, clock, worker, first


async def occurrence(app: AsyncApp, minute: int, name: str = "s") -> Timer | None:
    return await app.store.get_timer("ns", occurrence_key(name, START + minute * MINUTE))


async def at_minute(app: AsyncApp, clock: FrozenClock, worker: Materializer, minute: int) -> None:
    clock.set(START + minute * MINUTE)
    await worker.tick(clock.now())


async def claim(app: AsyncApp, clock: FrozenClock) -> list[Timer]:
    claimed = await app.store.claim_due("ns", None, clock.now(), 10, "n1", clock.now() + LEASE)
    return [c.timer for c in claimed]


async def finish(app: AsyncApp, clock: FrozenClock, timer: Timer, outcome: Outcome) -> None:
    run_at = clock.now() + MINUTE if outcome is Outcome.RETRY else None
    done = Finish(timer.id, timer.attempts, outcome, "boom", run_at=run_at)
    assert await app.store.finish([done], "n1", clock.now()) == set()


async def test_allow_fires_while_the_previous_runs_and_materialises_ahead(store: Store) -> None:
    app, clock, worker = await every_minute(store)
    clock.set(START + MINUTE - timedelta(seconds=3))
    await worker.tick(clock.now())
    assert await occurrence(app, 1) is not None  # made ahead, within the lookahead
    await at_minute(app, clock, worker, 1)
    (_first,) = await claim(app, clock)
    await at_minute(app, clock, worker, 2)
    second = await occurrence(app, 2)
    assert second is not None
    assert second.status is Status.SCHEDULED
    assert second.run_at == second.due_at


@pytest.mark.parametrize("policy", ["skip", "buffer_one"])
async def test_a_schedule_with_a_policy_is_made_ahead_and_claimable_at_its_instant(
    store: Store, policy: str
) -> None:
    """Made within the lookahead, as any schedule's: at its instant it is there to claim (a
    worker claims it ahead and starts it on time), no materialiser round needed then."""
    app, clock, worker = await every_minute(store, overlap=policy)
    assert await app.store.schedules.next_schedule_at("ns", timedelta(seconds=2)) == (
        START + MINUTE - timedelta(seconds=2)
    )
    clock.set(START + MINUTE - timedelta(seconds=3))
    assert await worker.tick(clock.now()) == 1
    first = await occurrence(app, 1)
    assert first is not None
    assert (first.status, first.run_at, first.last_error) == (
        Status.SCHEDULED,
        START + MINUTE,
        None,
    )
    assert await claim(app, clock) == []  # never early
    clock.set(START + MINUTE)
    assert [t.key for t in await claim(app, clock)] == [first.key]


async def made_behind_a_running_one(
    store: Store, policy: str, waiting_for: int = 1
) -> tuple[AsyncApp, FrozenClock, Timer]:
    """The 12:01 occurrence claimed (running); then the next ``waiting_for`` occurrences made
    three seconds ahead of each: they wait for it."""
    app, clock, worker = await every_minute(store, overlap=policy)
    await at_minute(app, clock, worker, 1)
    (first,) = await claim(app, clock)
    for minute in range(2, 2 + waiting_for):
        clock.set(START + minute * MINUTE - timedelta(seconds=3))
        assert await worker.tick(clock.now()) == 1
        made = await occurrence(app, minute)
        assert made is not None
        assert (made.status, made.run_at, made.last_error) == (
            Status.SCHEDULED,
            PARKED,
            waiting(policy),
        )
    return app, clock, first


@pytest.mark.parametrize("policy", ["skip", "buffer_one"])
async def test_one_waiting_fires_at_its_instant_when_the_earlier_ends_before_it(
    store: Store, policy: str
) -> None:
    app, clock, first = await made_behind_a_running_one(store, policy)
    clock.set(START + 2 * MINUTE - timedelta(seconds=1))
    await finish(app, clock, first, Outcome.DONE)
    second = await occurrence(app, 2)
    assert second is not None
    assert (second.status, second.run_at, second.last_error) == (
        Status.SCHEDULED,
        START + 2 * MINUTE,
        None,
    )
    assert await claim(app, clock) == []  # never early
    clock.set(START + 2 * MINUTE)
    assert [t.key for t in await claim(app, clock)] == [second.key]


@pytest.mark.parametrize(
    ("policy", "status", "run_at", "error"),
    [
        ("skip", Status.CANCELLED, START + 2 * MINUTE, SKIPPED_RUNNING),
        ("buffer_one", Status.SCHEDULED, START + 2 * MINUTE + timedelta(seconds=10), None),
    ],
)
async def test_one_waiting_is_skipped_or_buffered_when_the_earlier_ends_after_it(
    store: Store, policy: str, status: Status, run_at: datetime, error: str | None
) -> None:
    app, clock, first = await made_behind_a_running_one(store, policy)
    clock.set(START + 2 * MINUTE + timedelta(seconds=10))
    await finish(app, clock, first, Outcome.DONE)
    second = await occurrence(app, 2)
    assert second is not None
    assert (second.status, second.run_at, second.last_error) == (status, run_at, error)


@pytest.mark.parametrize(
    ("policy", "ended_at", "fates"),
    [
        # Ended between the two instants: skip skips the first, fires the second on time;
        # buffer_one runs the first now, the second waits behind it.
        ("skip", 2.5, [(Status.CANCELLED, 2, SKIPPED_RUNNING), (Status.SCHEDULED, 3, None)]),
        ("buffer_one", 2.5, [(Status.SCHEDULED, 2.5, None), (Status.SCHEDULED, None, "wait")]),
        # Ended after both: skip skips both; buffer_one runs one, skips the other.
        ("skip", 3.5, [(Status.CANCELLED, 2, SKIPPED_RUNNING)] * 2),
        (
            "buffer_one",
            3.5,
            [(Status.SCHEDULED, 3.5, None), (Status.CANCELLED, 3, SKIPPED_BUFFER_FULL)],
        ),
    ],
)
async def test_two_waiting_are_decided_together_by_the_earlier_ones_end(
    store: Store, policy: str, ended_at: float, fates: list[tuple[Status, float | None, Any]]
) -> None:
    app, clock, first = await made_behind_a_running_one(store, policy, waiting_for=2)
    clock.set(START + timedelta(minutes=ended_at))
    await finish(app, clock, first, Outcome.DONE)
    for minute, (status, run_minute, error) in zip((2, 3), fates, strict=True):
        timer = await occurrence(app, minute)
        assert timer is not None
        if run_minute is None:  # still waiting
            assert (timer.status, timer.run_at, timer.last_error) == (
                status,
                PARKED,
                waiting(policy),
            )
            continue
        if status is Status.CANCELLED:
            run_minute = minute
        run_at = START + timedelta(minutes=run_minute)
        assert (timer.status, timer.run_at, timer.last_error) == (status, run_at, error)


async def test_skip_records_the_occurrence_and_moves_on(store: Store) -> None:
    app, clock, worker, first = await running_at_two(store, overlap="skip")
    skipped = await occurrence(app, 2)
    assert skipped is not None
    assert skipped.status is Status.CANCELLED
    assert skipped.last_error == SKIPPED_RUNNING
    assert skipped.completed_at == START + 2 * MINUTE
    assert await claim(app, clock) == []
    await finish(app, clock, first, Outcome.DONE)
    await at_minute(app, clock, worker, 3)
    third = await occurrence(app, 3)
    assert third is not None
    assert third.status is Status.SCHEDULED
    schedule = await app.schedules.get("s")
    assert schedule.next_at == START + 4 * MINUTE


async def test_skip_counts_a_timer_waiting_for_its_retry_as_unfinished(store: Store) -> None:
    app, clock, worker = await every_minute(store, overlap="skip")
    await at_minute(app, clock, worker, 1)
    (first,) = await claim(app, clock)
    await finish(app, clock, first, Outcome.RETRY)
    await at_minute(app, clock, worker, 2)
    skipped = await occurrence(app, 2)
    assert skipped is not None
    assert skipped.status is Status.CANCELLED


async def test_skip_counts_an_occurrence_not_started_yet_as_unfinished(store: Store) -> None:
    app, clock, worker = await every_minute(store, overlap="skip")
    await at_minute(app, clock, worker, 1)  # no worker claims it
    await at_minute(app, clock, worker, 2)
    skipped = await occurrence(app, 2)
    assert skipped is not None
    assert skipped.status is Status.CANCELLED


async def test_buffer_one_waits_for_the_previous_and_skips_beyond_one(store: Store) -> None:
    app, clock, worker, first = await running_at_two(store, overlap="buffer_one")
    buffered = await occurrence(app, 2)
    assert buffered is not None
    assert (buffered.status, buffered.run_at, buffered.last_error) == (
        Status.SCHEDULED,
        PARKED,
        BUFFERED,
    )
    await at_minute(app, clock, worker, 3)
    third = await occurrence(app, 3)
    assert third is not None
    assert (third.status, third.last_error) == (Status.CANCELLED, SKIPPED_BUFFER_FULL)
    assert await claim(app, clock) == []  # the buffered one waits
    assert await app.store.next_run_at("ns", None) == PARKED

    clock.set(START + 3 * MINUTE + timedelta(seconds=10))
    await finish(app, clock, first, Outcome.DONE)
    released = await occurrence(app, 2)
    assert released is not None
    assert (released.status, released.run_at, released.last_error) == (
        Status.SCHEDULED,
        clock.now(),
        None,
    )
    (again,) = await claim(app, clock)
    assert again.key == occurrence_key("s", START + 2 * MINUTE)

    await at_minute(app, clock, worker, 4)  # the released one still runs: buffered again
    fourth = await occurrence(app, 4)
    assert fourth is not None
    assert fourth.run_at == PARKED


async def test_buffer_one_is_released_by_a_dead_or_cancelled_previous(store: Store) -> None:
    app, clock, worker, first = await running_at_two(store, overlap="buffer_one", max_attempts=1)
    await finish(app, clock, first, Outcome.DEAD)
    second = await occurrence(app, 2)
    assert second is not None
    assert second.run_at == clock.now()

    await at_minute(app, clock, worker, 3)  # the second is unfinished (not claimed yet)
    third = await occurrence(app, 3)
    assert third is not None
    assert third.run_at == PARKED
    await app.cancel(second.key)
    third = await occurrence(app, 3)
    assert third is not None
    assert (third.status, third.run_at) == (Status.SCHEDULED, clock.now())


async def test_deleting_the_schedule_cancels_its_buffered_occurrence(store: Store) -> None:
    app, clock, worker = await every_minute(store, overlap="buffer_one")
    await at_minute(app, clock, worker, 1)
    await at_minute(app, clock, worker, 2)
    _, cancelled = await app.schedules.delete("s")
    assert cancelled == 2
    for minute in (1, 2):
        timer = await occurrence(app, minute)
        assert timer is not None
        assert timer.status is Status.CANCELLED
    assert await claim(app, clock) == []


async def test_a_policy_applies_to_catch_up_after_an_outage(store: Store) -> None:
    app, clock, worker = await every_minute(store, overlap="buffer_one", catch_up="all")
    clock.set(START + 5 * MINUTE + timedelta(seconds=30))  # down past the grace: all 5
    await worker.tick(clock.now())
    fates = [await occurrence(app, minute) for minute in range(1, 6)]
    assert [(t.status, t.run_at == PARKED) for t in fates if t is not None] == [
        (Status.SCHEDULED, False),
        (Status.SCHEDULED, True),
        (Status.CANCELLED, False),
        (Status.CANCELLED, False),
        (Status.CANCELLED, False),
    ]


async def test_the_policy_can_be_changed_and_allow_goes_back_to_firing(store: Store) -> None:
    app, clock, worker = await every_minute(store, overlap="skip")
    await at_minute(app, clock, worker, 1)
    await claim(app, clock)
    changed = await app.schedules.update("s", overlap="allow")
    assert changed.overlap == "allow"
    await at_minute(app, clock, worker, 2)
    second = await occurrence(app, 2)
    assert second is not None
    assert second.status is Status.SCHEDULED


async def test_an_outage_shorter_than_the_grace_fires_every_late_occurrence(store: Store) -> None:
    clock = FrozenClock(START)
    app = app_on(store, clock)
    await app.schedules.add("short", "t", cron="* * * * *", catch_up="none", catch_up_grace=300)
    await app.schedules.add("long", "t", cron="* * * * *", catch_up="none", catch_up_grace="PT2M")
    worker = materializer(app)
    clock.set(START + 4 * MINUTE + timedelta(seconds=30))  # down 4.5 minutes
    await worker.tick(clock.now())
    short = [await occurrence(app, minute, "short") for minute in range(1, 5)]
    assert all(t is not None and t.status is Status.SCHEDULED for t in short)
    long = [await occurrence(app, minute, "long") for minute in range(1, 5)]
    assert long == [None] * 4  # past its grace: catch_up=none fires none of them
    schedule = await app.schedules.get("long")
    assert schedule.next_at == START + 5 * MINUTE
    assert schedule.catch_up_grace == timedelta(minutes=2)


async def test_a_buffered_occurrence_behind_one_made_before_the_policy_is_not_stranded(
    store: Store,
) -> None:
    app, clock, worker = await every_minute(store)
    await at_minute(app, clock, worker, 1)
    (first,) = await claim(app, clock)  # made under allow: its end releases nothing
    await app.schedules.update("s", overlap="buffer_one")
    await at_minute(app, clock, worker, 2)
    second = await occurrence(app, 2)
    assert second is not None
    assert second.run_at == PARKED
    await finish(app, clock, first, Outcome.DONE)
    second = await occurrence(app, 2)
    assert second is not None
    assert second.run_at == PARKED  # no trigger on an occurrence made under allow
    await at_minute(app, clock, worker, 3)  # the materialiser releases it; 12:03 is buffered
    second, third = await occurrence(app, 2), await occurrence(app, 3)
    assert second is not None
    assert (second.status, second.run_at) == (Status.SCHEDULED, clock.now())
    assert third is not None
    assert third.run_at == PARKED


async def test_a_release_wakes_the_workers(store: Store) -> None:
    app, clock, _worker, first = await running_at_two(store, overlap="buffer_one")
    heard: list[datetime | None] = []
    store.add_wakeup_listener(heard.append)
    try:
        clock.set(START + 2 * MINUTE + timedelta(seconds=7))
        await finish(app, clock, first, Outcome.DONE)
        await wait_until(lambda: clock.now() in heard)
    finally:
        store.remove_wakeup_listener(heard.append)
