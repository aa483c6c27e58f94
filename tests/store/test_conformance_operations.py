"""Store conformance, the operator's side: filtered listings, run now, bulk actions in batches,
activity per minute and the change marker. Every test runs against SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pytest
from storekit import NOW, StoreFactory, new_timer

from duetime.errors import Conflict, NotFound
from duetime.model import Finish, Outcome, Status, TimerFilter
from duetime.store import Store

LEASE = NOW + timedelta(minutes=5)


async def kill(store: Store, keys: list[str], at: timedelta = timedelta(0)) -> None:
    """Claim the due ``keys`` and end each attempt as dead."""
    claimed = await store.claim_due("ns", None, NOW + at, len(keys), "n1", LEASE + at)
    assert sorted(c.timer.key for c in claimed) == sorted(keys)
    began = NOW + at  # the handler's start, which the worker reports with the outcome
    finishes = [
        Finish(c.timer.id, c.attempt, Outcome.DEAD, error="no", started_at=began) for c in claimed
    ]
    assert await store.finish(finishes, "n1", NOW + at + timedelta(seconds=1)) == set()


async def keys(store: Store, filter: TimerFilter, limit: int = 2) -> list[str]:
    found: list[str] = []
    cursor = None
    while True:
        page = await store.list_timers("ns", filter, cursor, limit)
        found += [t.key for t in page.items]
        if page.next_cursor is None:
            return found
        cursor = page.next_cursor


async def test_listing_filters_by_type_glob_and_due_range_and_pages(store: Store) -> None:
    timers = [new_timer(f"a_{n}", timedelta(hours=n), type="order.paid_x") for n in range(4)]
    timers += [new_timer("b", timedelta(hours=1), type="orderXpaid_x")]  # '.' and '_' literal
    await store.put_timers(timers, "error", NOW)
    assert await keys(store, TimerFilter(type="order.*")) == ["a_3", "a_2", "a_1", "a_0"]
    assert await keys(store, TimerFilter(type="order.paid_x")) == ["a_3", "a_2", "a_1", "a_0"]
    assert await keys(store, TimerFilter(type="*X*")) == ["b"]
    window = TimerFilter(due_from=NOW + timedelta(hours=1), due_until=NOW + timedelta(hours=3))
    assert await keys(store, window) == ["b", "a_2", "a_1"]
    both = TimerFilter(type="order.*", due_from=NOW + timedelta(hours=2))
    assert await keys(store, both, limit=1) == ["a_3", "a_2"]


async def test_run_now_makes_a_pending_timer_due_and_refuses_others(store: Store) -> None:
    await store.put_timers([new_timer("later", timedelta(hours=5)), new_timer("d")], "error", NOW)
    timer = await store.run_now("ns", "later", NOW + timedelta(minutes=1))
    assert timer.run_at == NOW + timedelta(minutes=1)
    assert timer.status is Status.SCHEDULED
    await kill(store, ["d"])
    with pytest.raises(Conflict, match="is dead"):
        await store.run_now("ns", "d", NOW)
    with pytest.raises(NotFound):
        await store.run_now("ns", "nope", NOW)


async def test_bulk_walks_in_batches_and_takes_only_what_the_action_applies_to(
    store: Store,
) -> None:
    dead = [f"dead-{n}" for n in range(5)]
    await store.put_timers([new_timer(k, type="job.x") for k in dead], "error", NOW)
    await kill(store, dead)
    pending = [new_timer(f"p-{n}", timedelta(hours=1), type="job.x") for n in range(3)]
    await store.put_timers([*pending, new_timer("other", timedelta(hours=1))], "error", NOW)
    jobs = TimerFilter(type="job.*")
    assert await store.count_matching("ns", "replay", jobs, NOW) == 5
    assert await store.count_matching("ns", "cancel", jobs, NOW) == 3
    assert await store.count_matching("ns", "cancel", TimerFilter(), NOW) == 4

    changed, after, batches = 0, 0, 0
    while True:
        step, last = await store.bulk_batch("ns", "replay", jobs, after, NOW, 2)
        changed += step
        if last is None:
            break
        after, batches = last, batches + 1
    assert (changed, batches) == (5, 3)  # 2 + 2 + 1, then an empty batch says it is over
    counts = await store.count_by_status("ns")
    assert (counts[Status.DEAD], counts[Status.SCHEDULED]) == (0, 9)
    replayed = await store.get_timer("ns", "dead-0")
    assert replayed is not None
    assert (replayed.run_at, replayed.max_attempts) == (NOW, 3 + 1)

    last_pending = await store.get_timer("ns", "p-2")
    assert last_pending is not None
    # run now takes only what is not due yet: the five replayed are due at NOW already
    assert await store.count_matching("ns", "run_now", jobs, NOW) == 3
    run_now = TimerFilter(type="job.*", due_from=NOW + timedelta(minutes=30))
    assert await store.bulk_batch("ns", "run_now", run_now, 0, NOW, 10) == (3, last_pending.id)
    made_due = await store.get_timer("ns", "p-0")
    assert made_due is not None
    assert made_due.run_at == NOW
    step, _ = await store.bulk_batch("ns", "cancel", TimerFilter(status=Status.DEAD), 0, NOW, 10)
    assert step == 0  # nothing dead is pending
    step, _ = await store.bulk_batch("ns", "cancel", TimerFilter(subject=None), 0, NOW, 100)
    assert step == 9
    other = await store.get_timer("ns", "other")
    assert other is not None
    assert other.status is Status.CANCELLED


async def test_activity_counts_fired_timers_per_minute_by_status(store: Store) -> None:
    await store.put_timers([new_timer(f"k{n}") for n in range(3)], "error", NOW)
    await kill(store, ["k0", "k1", "k2"], at=timedelta(seconds=90))  # 90 s late, minute 1
    counts = await store.history.activity("ns", NOW, NOW + timedelta(minutes=5))
    assert [(c.minute, c.status, c.count) for c in counts] == [(1, "dead", 3)]
    assert counts[0].lateness_max_ms == 90_000
    assert counts[0].lateness_sum_ms == 270_000
    assert (
        await store.history.activity("ns", NOW + timedelta(minutes=2), NOW + timedelta(minutes=5))
        == []
    )


async def quiet_marker(store: Store, tries: int = 200) -> str:
    """The marker, read twice alike: a read that moved it itself would never be. On
    PostgreSQL the marker is the whole server's next transaction id, which the other test
    processes' writes move between two reads now and then: read again until two agree."""
    for _ in range(tries):
        first = await store.change_marker()
        if await store.change_marker() == first:
            return first
    raise AssertionError(f"the change marker moved at each of {tries} pairs of reads")


async def test_the_change_marker_moves_with_writes_of_any_process(
    store: Store, make_store: StoreFactory
) -> None:
    first = await quiet_marker(store)  # reading changes nothing
    await store.put_timers([new_timer("mine")], "error", NOW)
    mine = await store.change_marker()
    assert mine != first
    other = await make_store()
    await other.put_timers([new_timer("theirs")], "error", NOW)
    assert await store.change_marker() != mine


async def test_dead_letters_by_type_most_first(store: Store) -> None:
    keys_by_type = {"a.x": ["a1", "a2"], "b.y": ["b1", "b2", "b3"]}
    for type_, keys_of in keys_by_type.items():
        await store.put_timers([new_timer(k, type=type_) for k in keys_of], "error", NOW)
    await kill(store, ["a1", "a2", "b1", "b2", "b3"])
    groups = await store.dead_types("ns", 10)
    assert [(g.type, g.count) for g in groups] == [("b.y", 3), ("a.x", 2)]
    assert groups[0].newest_error == "no"
    assert groups[0].newest_at == NOW + timedelta(seconds=1)
    assert [g.type for g in await store.dead_types("ns", 1)] == ["b.y"]
    assert await store.dead_types("other", 10) == []
