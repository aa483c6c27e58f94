"""Store conformance, priority: among the due timers a claim takes the more urgent first
(priority 9 down to 1), then the normal ones (0) in due order, on every backend."""

from __future__ import annotations

from datetime import timedelta

from storekit import NOW, new_timer

from duetime.model import Status
from duetime.model.flow_rules import FlowRule, plan_of
from duetime.store import Store

LEASE = NOW + timedelta(seconds=30)
BACKLOG = 1_000


async def put_backlog(store: Store, type: str = "t") -> None:
    """BACKLOG normal timers, overdue by an hour and more, then 10 urgent ones due just now."""
    backlog = [
        new_timer(f"old-{i}", NOW - timedelta(hours=1, seconds=BACKLOG - i), type=type)
        for i in range(BACKLOG)
    ]
    await store.put_timers(backlog, "error", NOW - timedelta(hours=2))
    urgent = [
        new_timer(f"urgent-{i}", NOW - timedelta(seconds=10 - i), type=type, priority=1 + i % 9)
        for i in range(10)
    ]
    await store.put_timers(urgent, "error", NOW - timedelta(hours=2))


def urgent_order() -> list[str]:
    """The urgent keys in claim order: priority 9 first; priority 1 twice, earlier due first."""
    by = {f"urgent-{i}": (-(1 + i % 9), i) for i in range(10)}
    return sorted(by, key=by.__getitem__)


async def test_urgent_timers_come_in_the_first_claim_despite_an_overdue_backlog(
    store: Store,
) -> None:
    await put_backlog(store)
    first = await store.claim_due("ns", None, NOW, 100, "n1", LEASE)
    keys = [c.timer.key for c in first]
    assert len(keys) == 100
    assert keys[:10] == urgent_order()
    assert keys[10:] == [f"old-{i}" for i in range(90)]  # then the backlog, oldest first
    assert [c.timer.priority for c in first[:3]] == [9, 8, 7]
    second = await store.claim_due("ns", None, NOW, 100, "n1", LEASE)
    assert [c.timer.key for c in second] == [f"old-{i}" for i in range(90, 190)]


async def test_a_claim_smaller_than_the_urgent_ones_takes_the_most_urgent(store: Store) -> None:
    await put_backlog(store)
    first = await store.claim_due("ns", None, NOW, 4, "n1", LEASE)
    assert [c.timer.key for c in first] == urgent_order()[:4]
    rest = await store.claim_due("ns", None, NOW, 7, "n1", LEASE)
    assert [c.timer.key for c in rest] == [*urgent_order()[4:], "old-0"]


async def test_urgent_timers_not_yet_due_wait_for_their_time(store: Store) -> None:
    await store.put_timers(
        [
            new_timer("normal", NOW - timedelta(seconds=1), type="t"),
            new_timer("later", NOW + timedelta(seconds=5), type="t", priority=9),
        ],
        "error",
        NOW - timedelta(minutes=1),
    )
    assert [c.timer.key for c in await store.claim_due("ns", None, NOW, 10, "n1", LEASE)] == [
        "normal"
    ]
    assert await store.next_run_at("ns", None) == NOW + timedelta(seconds=5)
    later = await store.claim_due("ns", None, NOW + timedelta(seconds=5), 10, "n1", LEASE)
    assert [(c.timer.key, c.timer.priority) for c in later] == [("later", 9)]


async def test_priority_is_stored_updated_and_kept(store: Store) -> None:
    (created,) = await store.put_timers([new_timer("k", priority=3)], "update", NOW)
    assert (created.action, created.timer.priority) == ("created", 3)
    stored = await store.get_timer("ns", "k")
    assert stored is not None
    assert stored.priority == 3
    (again,) = await store.put_timers([new_timer("k", priority=3)], "update", NOW)
    assert again.action == "kept"
    (changed,) = await store.put_timers([new_timer("k", priority=0)], "update", NOW)
    assert (changed.action, changed.timer.priority) == ("updated", 0)
    normal = await store.get_timer("ns", "k")
    assert normal is not None
    assert normal.priority == 0


async def test_a_ruled_claim_takes_urgent_timers_first_too(store: Store) -> None:
    """Under flow control the claims order the same way: a limit's claim and the claim of the
    types no rule governs both take their urgent due timers before their backlog."""
    await store.limits.put_limit(FlowRule("ns", "crm.*", concurrency=3), NOW)
    await put_backlog(store, type="crm.sync")
    await store.put_timers(
        [
            new_timer("plain-old", NOW - timedelta(hours=3), type="other"),
            new_timer("plain-urgent", NOW, type="other", priority=5),
        ],
        "error",
        NOW - timedelta(hours=4),
    )
    plan = plan_of(await store.limits.list_rules("ns"))
    ruled = await store.limits.claim("ns", None, NOW, 100, "n1", LEASE, plan)
    crm = [c.timer.key for c in ruled.claimed if c.timer.type == "crm.sync"]
    other = [c.timer.key for c in ruled.claimed if c.timer.type == "other"]
    assert crm == urgent_order()[:3]  # the limit's three are its most urgent
    assert other == ["plain-urgent", "plain-old"]
    for key in urgent_order()[3:]:
        timer = await store.get_timer("ns", key)
        assert timer is not None
        assert timer.status is Status.SCHEDULED
