"""Store conformance, deleting: finished timers leave with their attempts (and on PostgreSQL
with their archived history), one by key or in bulk by a filter or a selection of keys; pending
and running ones stay. Every test runs against SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from storekit import NOW, new_timer
from test_conformance_history import LATER, POLICY, every_state, finish

from duetime.errors import Conflict, NotFound
from duetime.model import Outcome, Status, TimerFilter
from duetime.store import Store

FINISHED = ["done", "cancelled", "expired", "dead", "unfired-cancel"]
UNFINISHED = {"running": "let it finish", "retrying": "cancel it first", "pending": "cancel it"}


async def delete_all(store: Store, **kwargs: object) -> tuple[int, int]:
    """Run a bulk delete to its end in batches of 2; (how many deleted, batches)."""
    changed, after, batches = 0, 0, 0
    while True:
        step, last = await store.bulk_batch(
            "ns", "delete", after_id=after, now=NOW, limit=2, **kwargs
        )  # type: ignore[arg-type]
        changed += step
        if last is None:
            return changed, batches
        after, batches = last, batches + 1


@pytest.mark.parametrize("archived", [False, True], ids=["hot", "after-maintenance"])
async def test_a_finished_timer_is_deleted_with_its_attempts(store: Store, archived: bool) -> None:
    before = await every_state(store)
    if archived:  # PostgreSQL: done, cancelled and expired now live in the history tables
        await store.history.maintain(POLICY, LATER)
    for key in FINISHED:
        timer = before[key]
        gone = await store.delete("ns", key, NOW)
        assert (gone.id, gone.key, gone.status) == (timer.id, key, timer.status)
        assert await store.get_timer("ns", key) is None
        assert await store.list_attempts(timer.id) == []
        with pytest.raises(NotFound):
            await store.delete("ns", key, NOW)
    listed = await store.list_timers("ns", TimerFilter(), None, 50)
    assert sorted(t.key for t in listed.items) == sorted(UNFINISHED)


async def test_a_pending_or_running_timer_is_refused_saying_what_to_do(store: Store) -> None:
    before = await every_state(store)
    for key, advice in UNFINISHED.items():
        with pytest.raises(Conflict, match=f"is {before[key].status}: .*; {advice}"):
            await store.delete("ns", key, NOW)
        still = await store.get_timer("ns", key)
        assert still is not None
        assert still.status is before[key].status
    assert [a.number for a in await store.list_attempts(before["retrying"].id)] == [1]
    with pytest.raises(NotFound):
        await store.delete("ns", "no-such-key", NOW)


async def test_the_newest_timer_deleted_never_lends_its_id(store: Store) -> None:
    await store.put_timers([new_timer("a"), new_timer("b")], "error", NOW)
    await finish(store, "b", Outcome.DEAD)
    newest = await store.delete("ns", "b", NOW)
    (again,) = await store.put_timers([new_timer("b")], "error", NOW)
    assert again.action == "created"
    assert again.timer.id > newest.id
    assert await store.list_attempts(again.timer.id) == []
    listed = await store.list_timers("ns", TimerFilter(), None, 50)
    assert [t.key for t in listed.items] == ["b", "a"]
    assert await store.count_by_status("ns") == {
        **dict.fromkeys(Status, 0),
        Status.SCHEDULED: 2,
    }


@pytest.mark.parametrize("archived", [False, True], ids=["hot", "after-maintenance"])
async def test_bulk_delete_takes_what_the_filter_shows(store: Store, archived: bool) -> None:
    before = await every_state(store)
    if archived:
        await store.history.maintain(POLICY, LATER)
    everything = TimerFilter(subject="s")
    assert await store.count_matching("ns", "delete", everything, NOW) == len(FINISHED)
    cancelled = TimerFilter(status=Status.CANCELLED)
    assert await store.count_matching("ns", "delete", cancelled, NOW) == 2
    assert await delete_all(store, filter=cancelled) == (2, 1)
    assert await delete_all(store, filter=everything) == (3, 2)
    assert await store.count_matching("ns", "delete", everything, NOW) == 0
    for key in FINISHED:
        assert await store.get_timer("ns", key) is None
        assert await store.list_attempts(before[key].id) == []
    listed = await store.list_timers("ns", everything, None, 50)
    assert sorted(t.key for t in listed.items) == sorted(UNFINISHED)


@pytest.mark.parametrize("archived", [False, True], ids=["hot", "after-maintenance"])
async def test_bulk_actions_take_a_selection_of_keys(store: Store, archived: bool) -> None:
    await every_state(store)
    if archived:
        await store.history.maintain(POLICY, LATER)
    chosen = ["done", "dead", "pending", "retrying", "running", "nope"]
    every = TimerFilter()
    assert await store.count_matching("ns", "delete", every, NOW, keys=chosen) == 2
    assert await store.count_matching("ns", "cancel", every, NOW, keys=chosen) == 2
    assert await store.count_matching("ns", "replay", every, NOW, keys=chosen) == 1
    dead_only = TimerFilter(status=Status.DEAD)
    assert await store.count_matching("ns", "delete", dead_only, NOW, keys=chosen) == 1
    assert await delete_all(store, filter=every, keys=chosen) == (2, 1)
    assert await store.get_timer("ns", "done") is None
    assert await store.get_timer("ns", "dead") is None
    assert await store.get_timer("ns", "expired") is not None  # not chosen
    step, _ = await store.bulk_batch("ns", "cancel", every, 0, NOW, 10, keys=chosen)
    assert step == 2
    pending = await store.get_timer("ns", "pending")
    assert pending is not None
    assert pending.status is Status.CANCELLED
