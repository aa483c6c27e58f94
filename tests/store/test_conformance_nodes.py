"""Store conformance: nodes, and wake-ups heard by this process and by other ones.

Every test runs against each backend (SQLite and PostgreSQL) and must behave identically.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from storekit import NOW, StoreFactory, new_timer, wait_until
from tests.waiting import until

from duetime.model import Finish, Node, Outcome
from duetime.store import Store

MARK = NOW + timedelta(days=400)
"""When the marker timers of :func:`all_heard` are due: no test's own timer is due then."""


async def all_heard(make_store: StoreFactory, *heard: list[datetime | None]) -> None:
    """Wait until every hint sent so far has reached each list of ``heard`` (its listener's),
    then take the marker out of them.

    Another instance writes a timer due at MARK: on PostgreSQL its NOTIFY reaches each
    listener after every earlier one (a listening session hears them in commit order), so a
    listener that has heard the mark has heard all before it; there is no pause to guess. It
    writes again until all have heard one (a listener may still be connecting)."""
    writer = await make_store()

    async def marked() -> bool:
        if all(MARK in each for each in heard):
            return True
        await writer.put_timers([new_timer(None, MARK)], "error", NOW)
        return False

    await until(marked, 60, "every listener to hear the marker", every=0.05)
    for each in heard:
        each[:] = [hint for hint in each if hint != MARK]


async def test_nodes_register_list_and_deregister(store: Store) -> None:
    early = Node("n-early", "h1", 11, NOW - timedelta(hours=1), NOW, role="api")
    late = Node("n-late", "h2", 22, NOW, NOW, in_flight=3)
    await store.register_node(late)
    await store.register_node(early)
    assert await store.list_nodes() == [early, late]
    again = NOW + timedelta(minutes=1)
    await store.register_node(Node("n-early", "elsewhere", 99, again, again))
    (first, _) = await store.list_nodes()
    assert (first.host, first.pid, first.started_at, first.heartbeat_at) == (
        "h1",
        11,
        early.started_at,
        again,
    )
    await store.deregister_node("n-early")
    await store.deregister_node("never-registered")
    assert [n.id for n in await store.list_nodes()] == ["n-late"]


async def test_wakeups_are_heard_here_and_by_other_instances(
    store: Store, make_store: StoreFactory
) -> None:
    other = await make_store()
    here: list[datetime | None] = []
    there: list[datetime | None] = []
    store.add_wakeup_listener(here.append)
    other.add_wakeup_listener(there.append)
    due = NOW + timedelta(seconds=42)
    await store.put_timers([new_timer("a", due), new_timer("b", due + timedelta(1))], "error", NOW)
    assert here[-1] == due  # at once, in this process
    await wait_until(lambda: due in there)
    await all_heard(make_store, here, there)  # this store hears its own NOTIFY too

    here.clear()
    there.clear()
    await store.put_timers([new_timer("a", NOW)], "keep", NOW)  # kept: nothing new is due
    await all_heard(make_store, here, there)
    assert here == []
    # A bare "re-read" hint (None) may come at any time, e.g. after a listener reconnects;
    # what must not come is news of a due time, since nothing new is due.
    assert [hint for hint in there if hint is not None] == []


async def test_a_lone_batch_of_drawn_keys_wakes_here_and_other_instances(
    store: Store, make_store: StoreFactory
) -> None:
    """Timers whose keys the store draws (``emit()``) go out in one round trip on PostgreSQL,
    their NOTIFY with them: the earliest of them is heard everywhere all the same."""
    other = await make_store()
    here: list[datetime | None] = []
    there: list[datetime | None] = []
    store.add_wakeup_listener(here.append)
    other.add_wakeup_listener(there.append)
    due = NOW + timedelta(seconds=7)
    batch = [new_timer(None, due + timedelta(seconds=1)), new_timer(None, due)]
    results = await store.put_timers(batch, "error", NOW)
    assert [r.action for r in results] == ["created", "created"]
    assert [r.timer.due_at for r in results] == [due + timedelta(seconds=1), due]
    assert here[-1] == due
    await wait_until(lambda: due in there)
    assert await other.get_timer("ns", results[1].timer.key) == results[1].timer


async def test_a_removed_wakeup_listener_hears_nothing_more(
    store: Store, make_store: StoreFactory
) -> None:
    kept: list[datetime | None] = []
    removed: list[datetime | None] = []
    store.add_wakeup_listener(kept.append)
    store.add_wakeup_listener(removed.append)
    store.remove_wakeup_listener(removed.append)
    store.remove_wakeup_listener(removed.append)  # no longer there: nothing happens
    await store.put_timers([new_timer("a", NOW)], "error", NOW)
    await all_heard(make_store, kept)  # the hint has come back over the wire, too
    assert NOW in kept
    assert removed == []


async def test_a_retry_wakes_other_instances(store: Store, make_store: StoreFactory) -> None:
    other = await make_store()
    there: list[datetime | None] = []
    other.add_wakeup_listener(there.append)
    await store.put_timers([new_timer("a")], "error", NOW)
    (claimed,) = await store.claim_due("ns", None, NOW, 1, "n1", NOW + timedelta(seconds=30))
    retry_at = NOW + timedelta(seconds=5)
    await wait_until(lambda: NOW in there)
    await store.finish([Finish(claimed.timer.id, 1, Outcome.RETRY, "x", retry_at)], "n1", NOW)
    await wait_until(lambda: retry_at in there)
