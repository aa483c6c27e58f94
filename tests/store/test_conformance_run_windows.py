"""Store conformance, run windows: a timer with a window keeps its nominal ``due_at`` and runs
at its hashed instant within the window; an even group is spread over its window in one pass,
exactly, ranked by key, the same whoever computes it. Both stores."""

from __future__ import annotations

from datetime import timedelta

from storekit import NOW, new_timer

from duetime.model import Status
from duetime.store import Store
from duetime.store.run_windows import SpreadGroup
from duetime.timemath.run_window import even_offset, hashed_instant

WINDOW = timedelta(minutes=15)
LEASE = NOW + timedelta(hours=1)


async def test_a_windowed_timer_runs_at_its_hashed_instant_and_keeps_its_due(
    store: Store,
) -> None:
    (put,) = await store.put_timers(
        [new_timer("k", NOW, window=WINDOW, spread="hash")], "error", NOW - timedelta(hours=1)
    )
    chosen = hashed_instant("ns", "k", NOW, WINDOW)
    assert NOW < chosen < NOW + WINDOW
    assert (put.timer.due_at, put.timer.run_at) == (NOW, chosen)
    assert (put.timer.window, put.timer.spread) == (WINDOW, "hash")
    stored = await store.get_timer("ns", "k")
    assert stored is not None
    assert (stored.due_at, stored.run_at, stored.window, stored.spread) == (
        NOW,
        chosen,
        WINDOW,
        "hash",
    )
    assert stored.to_dict()["window"] == 900.0
    assert await store.claim_due("ns", None, NOW, 10, "n1", LEASE) == []
    assert await store.next_run_at("ns", None) == chosen
    (claimed,) = await store.claim_due("ns", None, chosen, 10, "n1", LEASE)
    assert (claimed.timer.key, claimed.timer.due_at) == ("k", NOW)


async def test_the_same_windowed_request_again_is_kept(store: Store) -> None:
    timer = new_timer("k", NOW, window=WINDOW, spread="hash")
    await store.put_timers([timer], "update", NOW - timedelta(hours=1))
    (again,) = await store.put_timers([timer], "update", NOW - timedelta(hours=1))
    assert again.action == "kept"
    (wider,) = await store.put_timers(
        [new_timer("k", NOW, window=2 * WINDOW, spread="hash")], "update", NOW
    )
    assert wider.action == "updated"
    stored = await store.get_timer("ns", "k")
    assert stored is not None
    assert (stored.window, stored.run_at) == (
        2 * WINDOW,
        hashed_instant("ns", "k", NOW, 2 * WINDOW),
    )


async def test_an_even_group_is_spread_exactly_ranked_by_key(store: Store) -> None:
    keys = [f"g-{i:03d}" for i in range(37)]
    timers = [new_timer(k, NOW, type="greet", window=WINDOW, spread="even") for k in keys]
    other = new_timer("other", NOW, type="else", window=WINDOW, spread="even")
    await store.put_timers([*reversed(timers), other], "error", NOW - timedelta(hours=1))
    group = SpreadGroup("ns", "greet", NOW, WINDOW)
    assert await store.spreads.spread([group]) >= 36  # one may sit at its place already
    for rank, key in enumerate(sorted(keys)):
        stored = await store.get_timer("ns", key)
        assert stored is not None
        assert stored.run_at == NOW + even_offset(rank, len(keys), WINDOW)
        assert stored.due_at == NOW
    untouched = await store.get_timer("ns", "other")  # another type: another group
    assert untouched is not None
    assert untouched.run_at == hashed_instant("ns", "other", NOW, WINDOW)
    assert await store.spreads.spread([group]) == 0  # nothing moves twice


async def test_a_timer_added_later_spreads_the_unclaimed_group_again(store: Store) -> None:
    first = [new_timer(f"a-{i}", NOW, type="greet", window=WINDOW, spread="even") for i in range(4)]
    await store.put_timers(first, "error", NOW - timedelta(hours=1))
    group = SpreadGroup("ns", "greet", NOW, WINDOW)
    await store.spreads.spread([group])
    claimed = await store.claim_due("ns", None, NOW, 1, "n1", LEASE)  # a-0 runs at NOW
    assert [c.timer.key for c in claimed] == ["a-0"]
    late = [new_timer(f"b-{i}", NOW, type="greet", window=WINDOW, spread="even") for i in range(2)]
    await store.put_timers(late, "error", NOW)
    await store.spreads.spread([group])
    pending = ["a-1", "a-2", "a-3", "b-0", "b-1"]  # a-0 is running: not counted, not moved
    for rank, key in enumerate(pending):
        stored = await store.get_timer("ns", key)
        assert stored is not None
        assert stored.status is Status.SCHEDULED
        assert stored.run_at == NOW + even_offset(rank, len(pending), WINDOW)


async def test_a_timer_without_a_window_has_none(store: Store) -> None:
    (put,) = await store.put_timers([new_timer("plain", NOW)], "error", NOW)
    assert (put.timer.run_at, put.timer.window, put.timer.spread) == (NOW, None, None)
    stored = await store.get_timer("ns", "plain")
    assert stored is not None
    assert (stored.window, stored.spread) == (None, None)
