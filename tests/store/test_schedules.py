"""Store conformance for schedules: put, get, list, save (version-checked), delete, advance.

Every test runs against each backend (SQLite and PostgreSQL) and must behave identically.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pytest
from storekit import NOW, new_timer

from duetime.errors import AlreadyExists, InvalidInput
from duetime.model import Finish, Outcome, Schedule, Status, TimerFilter
from duetime.model.schedules import Occurrence
from duetime.schedules import (
    NewSchedule,
    ScheduleAdvance,
    ScheduleFilter,
    ScheduleRequest,
    occurrence_key,
)
from duetime.store import Store
from duetime.store.parts import ScheduleStore

HOUR = timedelta(hours=1)


def new_schedule(name: str, namespace: str = "ns", **fields: object) -> NewSchedule:
    """A schedule resolved at NOW; hourly cron unless told otherwise."""
    if "every" not in fields and "cron" not in fields:
        fields["cron"] = "0 * * * *"
    request = ScheduleRequest(name=name, type=f"t.{name}", **fields)  # type: ignore[arg-type]
    return request.resolve(namespace, NOW, 5, 1024)


def s(store: Store) -> ScheduleStore:
    return store.schedules


async def add(store: Store, *schedules: NewSchedule) -> list[Schedule]:
    stored = await s(store).put_schedules(schedules, "keep", NOW)
    assert all(row is not None for row in stored)
    return [row for row in stored if row is not None]


def occurrence(schedule: Schedule, instant: datetime) -> ScheduleAdvance:
    """An advance that fires ``instant`` and moves on an hour."""
    timer = Occurrence(occurrence_key(schedule.name, instant), instant)
    return ScheduleAdvance(
        schedule.id, schedule.version, instant + HOUR, instant, instant, (timer,)
    )


async def test_put_get_round_trips_every_field(store: Store) -> None:
    cron = new_schedule(
        "cron",
        payload={"nested": [1, 2.5, "ü", None]},
        timezone="America/New_York",
        subject="user-1",
        start_at=NOW + HOUR,
        end_at=NOW + 1000 * HOUR,
        catch_up="all",
        on_gap="skip",
        on_overlap="both",
        active=False,
        max_attempts=7,
    )
    every = new_schedule("every", every="PT90.5S")
    a, b = await add(store, cron, every)
    assert (a.name, a.type, a.payload) == ("cron", "t.cron", {"nested": [1, 2.5, "ü", None]})
    assert (a.cron, a.every, a.timezone) == ("0 * * * *", None, "America/New_York")
    assert (a.start_at, a.end_at) == (NOW + HOUR, NOW + 1000 * HOUR)
    assert (a.catch_up, a.on_gap, a.on_overlap) == ("all", "skip", "both")
    assert (a.active, a.max_attempts, a.subject) == (False, 7, "user-1")
    assert (a.next_at, a.after_at, a.last_at) == (NOW + HOUR, NOW, None)
    assert (a.created_at, a.updated_at, a.version) == (NOW, NOW, 1)
    assert (b.cron, b.every, b.timezone) == (None, timedelta(seconds=90.5), "UTC")
    assert b.anchor_at == NOW + timedelta(seconds=1)
    assert b.next_at == b.anchor_at  # an interval fires first on its anchor
    assert await s(store).get_schedule("ns", "cron") == a
    assert await s(store).get_schedule("ns", "every") == b
    assert await s(store).get_schedule("other", "cron") is None


async def test_a_taken_name_is_kept_or_refused(store: Store) -> None:
    (first,) = await add(store, new_schedule("a"))
    assert await s(store).put_schedules([new_schedule("a", every=60)], "keep", NOW) == [None]
    with pytest.raises(AlreadyExists):
        await s(store).put_schedules([new_schedule("b"), new_schedule("a")], "error", NOW)
    assert await s(store).get_schedule("ns", "b") is None  # nothing of the batch stored
    assert await s(store).get_schedule("ns", "a") == first
    (other,) = await add(store, new_schedule("a", namespace="other"))
    assert other.id != first.id


async def test_list_by_name_with_filters_and_cursor(store: Store) -> None:
    names = [f"n{i:02d}" for i in range(7)]
    await add(
        store,
        *[
            new_schedule(n, subject="u1" if i % 2 else None, active=i != 3)
            for i, n in enumerate(names)
        ],
    )
    await add(store, new_schedule("zz", namespace="other"))
    seen: list[str] = []
    cursor = None
    while True:
        page = await s(store).list_schedules("ns", ScheduleFilter(), cursor, 3)
        seen += [x.name for x in page.items]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == names
    subject = await s(store).list_schedules("ns", ScheduleFilter(subject="u1"), None, 50)
    assert [x.name for x in subject.items] == ["n01", "n03", "n05"]
    paused = await s(store).list_schedules("ns", ScheduleFilter(active=False), None, 50)
    assert [x.name for x in paused.items] == ["n03"]
    typed = await s(store).list_schedules("ns", ScheduleFilter(type="t.n04"), None, 50)
    assert [x.name for x in typed.items] == ["n04"]
    with pytest.raises(InvalidInput):
        await s(store).list_schedules("ns", ScheduleFilter(), "garbage!", 5)


async def test_save_checks_the_version_and_releases_early_occurrences(store: Store) -> None:
    (sched,) = await add(store, new_schedule("a"))
    first, second = NOW + HOUR, NOW + 2 * HOUR
    assert await s(store).advance_schedules([occurrence(sched, first)], NOW) == [sched.id]
    moved = await s(store).get_schedule("ns", "a")
    assert moved is not None
    assert moved.version == 2
    advanced = await s(store).advance_schedules([occurrence(moved, second)], NOW)
    assert advanced == [sched.id]
    # A worker fires the first occurrence; the second waits.
    claimed = await store.claim_due("ns", None, first, 10, "n1", first + HOUR)
    assert [c.timer.key for c in claimed] == [occurrence_key("a", first)]
    stale = replace(moved, payload={"v": 2})  # version 2: someone advanced it since
    assert await s(store).save_schedule(stale, NOW, NOW) is None
    current = await s(store).get_schedule("ns", "a")
    assert current is not None
    assert current.version == 3
    revised = replace(current, payload={"v": 2}, after_at=NOW, next_at=first)
    saved = await s(store).save_schedule(revised, NOW + timedelta(minutes=1), NOW)
    assert saved is not None
    assert (saved.version, saved.payload, saved.after_at) == (4, {"v": 2}, NOW)
    assert saved.updated_at == NOW + timedelta(minutes=1)
    # The running one stays; the one not fired yet is gone, to be made again.
    assert (await store.get_timer("ns", occurrence_key("a", first))) is not None
    assert await store.get_timer("ns", occurrence_key("a", second)) is None


async def test_delete_cancels_pending_occurrences_only(store: Store) -> None:
    a, b = await add(store, new_schedule("a"), new_schedule("b"))
    first, second = NOW + HOUR, NOW + 2 * HOUR
    await s(store).advance_schedules([occurrence(a, first), occurrence(b, first)], NOW)
    a2 = await s(store).get_schedule("ns", "a")
    assert a2 is not None
    await s(store).advance_schedules([occurrence(a2, second)], NOW)
    claimed = await store.claim_due("ns", ["t.a"], first, 1, "n1", first + HOUR)
    finish = Finish(claimed[0].timer.id, claimed[0].attempt, Outcome.DONE)
    assert await store.finish([finish], "n1", first) == set()
    deleted = await s(store).delete_schedule("ns", "a", NOW + 2 * HOUR)
    assert deleted is not None
    assert (deleted[0].name, deleted[1]) == ("a", 1)
    done = await store.get_timer("ns", occurrence_key("a", first))
    cancelled = await store.get_timer("ns", occurrence_key("a", second))
    other = await store.get_timer("ns", occurrence_key("b", first))
    assert done is not None
    assert done.status is Status.DONE
    assert cancelled is not None
    assert cancelled.status is Status.CANCELLED
    assert other is not None
    assert other.status is Status.SCHEDULED
    assert await s(store).get_schedule("ns", "a") is None
    assert await s(store).delete_schedule("ns", "a", NOW) is None


async def test_a_recreated_schedule_takes_over_a_cancelled_key(store: Store) -> None:
    (a,) = await add(store, new_schedule("a"))
    first = NOW + HOUR
    await s(store).advance_schedules([occurrence(a, first)], NOW)
    await s(store).delete_schedule("ns", "a", NOW)
    (again,) = await add(store, new_schedule("a"))
    assert await s(store).advance_schedules([occurrence(again, first)], NOW) == [again.id]
    timer = await store.get_timer("ns", occurrence_key("a", first))
    assert timer is not None
    assert timer.status is Status.SCHEDULED
    # Advancing the same occurrence again creates nothing new (idempotent by key).
    current = await s(store).get_schedule("ns", "a")
    assert current is not None
    await s(store).advance_schedules([occurrence(current, first)], NOW)
    page = await store.list_timers("ns", TimerFilter(), None, 10)
    assert [t.key for t in page.items] == [occurrence_key("a", first)]


async def test_due_and_next_in_order_of_next_occurrence(store: Store) -> None:
    await add(
        store,
        new_schedule("late", cron="30 * * * *"),
        new_schedule("soon", cron="10 * * * *"),
        new_schedule("paused", cron="5 * * * *", active=False),
        new_schedule("elsewhere", namespace="other", cron="1 * * * *"),
    )
    assert await s(store).next_schedule_at("ns") == NOW + timedelta(minutes=10)
    due = await s(store).due_schedules("ns", NOW + timedelta(minutes=30), 10)
    assert [x.name for x in due] == ["soon", "late"]
    assert [x.name for x in await s(store).due_schedules("ns", NOW + HOUR, 1)] == ["soon"]
    assert await s(store).due_schedules("ns", NOW, 10) == []
    assert await s(store).next_schedule_at("empty") is None


async def test_advance_skips_stale_versions_and_their_timers(store: Store) -> None:
    a, b = await add(store, new_schedule("a"), new_schedule("b"))
    first = NOW + HOUR
    stale_b = replace(occurrence(b, first), version=b.version + 5)
    advanced = await s(store).advance_schedules([occurrence(a, first), stale_b], NOW)
    assert advanced == [a.id]
    assert await store.get_timer("ns", occurrence_key("a", first)) is not None
    assert await store.get_timer("ns", occurrence_key("b", first)) is None
    a2 = await s(store).get_schedule("ns", "a")
    assert a2 is not None
    assert (a2.next_at, a2.after_at, a2.last_at, a2.version) == (first + HOUR, first, first, 2)


async def test_meta_values(store: Store) -> None:
    assert await s(store).get_meta("tzdata_version") is None
    await s(store).set_meta("tzdata_version", "2024a", NOW)
    await s(store).set_meta("tzdata_version", "2025b", NOW)
    assert await s(store).get_meta("tzdata_version") == "2025b"


async def test_pending_local_timers_and_reresolve(store: Store) -> None:
    local = datetime(2025, 7, 1, 9, 0)
    await store.put_timers(
        [
            new_timer("l1", NOW + HOUR, local=local, timezone="America/New_York"),
            new_timer("plain", NOW + HOUR),
            new_timer("l2", NOW + 2 * HOUR, local=local, timezone="Asia/Tokyo"),
        ],
        "update",
        NOW,
    )
    found = await s(store).pending_local_timers(0, 10)
    assert [t.key for t in found] == ["l1", "l2"]
    assert [t.key for t in await s(store).pending_local_timers(found[0].id, 10)] == ["l2"]
    l1 = found[0]
    moved = await s(store).reresolve_timers(
        [(l1.id, l1.due_at, l1.due_at + HOUR), (found[1].id, NOW, NOW)], NOW
    )
    assert moved == 1  # the second names a stale due time: left alone
    timer = await store.get_timer("ns", "l1")
    assert timer is not None
    assert (timer.due_at, timer.run_at) == (NOW + 2 * HOUR,) * 2
