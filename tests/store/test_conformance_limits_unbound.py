"""Store conformance, flow control: a rule far from its bound costs a claim nothing.

A rate far from its bound lets its rows start at once (their pacing counts from an instant
earlier than the grant's by the rate's slack, ``store.limits.slack``); a claim whose every type
a rule governs makes no claim of the ungoverned types (a transaction that could find nothing),
so the limits share all of the claim's rows. Each runs on SQLite and PostgreSQL.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from storekit import NOW, new_timer

from duetime.model import ClaimFilter
from duetime.model.flow_rules import FlowPlan, FlowRule, plan_of
from duetime.store import Store
from duetime.timemath.ratelimit import Rate
from duetime.worker.flow import RATE_START_DELAY

LEASE = NOW + timedelta(seconds=30)
HOURLY = Rate(1, timedelta(hours=1))


async def put_due(store: Store, type: str, count: int) -> None:
    await store.put_timers(
        [
            new_timer(f"{type}-{i}", NOW - timedelta(seconds=count - i), type=type)
            for i in range(count)
        ],
        "error",
        NOW - timedelta(minutes=1),
    )


async def plan(store: Store) -> FlowPlan:
    return plan_of(await store.limits.list_rules("ns"))


async def test_a_rate_far_from_its_bound_paces_nothing(store: Store) -> None:
    rate = Rate(1_000_000, timedelta(seconds=1))
    await store.limits.put_limit(FlowRule("ns", "hook", rate=rate, burst=1_000_000), NOW)
    await put_due(store, "hook", 3)
    before = datetime.now(UTC)  # the grant's clock: the database's, on this machine
    ruled = await store.limits.claim("ns", None, NOW, 100, "n1", LEASE, await plan(store))
    assert len(ruled.claimed) == 3
    assert ruled.held == ()
    # A worker holds each row until its instant plus RATE_START_DELAY: already past.
    assert set(ruled.granted_at) == {c.timer.id for c in ruled.claimed}
    assert all(at + RATE_START_DELAY <= before for at in ruled.granted_at.values())


async def test_a_default_burst_far_from_its_bound_paces_nothing_claim_after_claim(
    store: Store,
) -> None:
    """The default burst (50 ms of starts) covers only half the pacing: the rate's instant
    alone would pace a claim right after another; its marks show it used at a sliver."""
    rate = Rate(1_000_000, timedelta(seconds=1))
    await store.limits.put_limit(FlowRule("ns", "hook", rate=rate), NOW)
    await put_due(store, "hook", 12)
    rules = await plan(store)
    for _ in range(4):
        before = datetime.now(UTC)
        ruled = await store.limits.claim("ns", None, NOW, 6, "n1", LEASE, rules)  # 3 each
        assert len(ruled.claimed) == 3
        assert all(at + RATE_START_DELAY <= before for at in ruled.granted_at.values())


async def test_a_claim_of_governed_types_alone_gives_the_limits_every_row(store: Store) -> None:
    await store.limits.put_limit(FlowRule("ns", "crm.*", concurrency=100_000), NOW)
    await store.limits.set_paused("ns", "report", True, NOW)
    await put_due(store, "crm.sync", 10)
    await put_due(store, "report", 2)
    rules = await plan(store)
    exact = ["crm.sync", "report"]
    for first, types in enumerate((exact, ClaimFilter.of_types(exact))):
        ruled = await store.limits.claim("ns", types, NOW, 4, "n1", LEASE, rules)
        # The limit's share is the whole claim (beside an ungoverned part it was half).
        keys = [f"crm.sync-{i}" for i in range(4 * first, 4 * first + 4)]
        assert [c.timer.key for c in ruled.claimed] == keys
        assert not ruled.ungoverned_short
    # A type no rule governs is still claimed beside the limit's, each taking half.
    await put_due(store, "other", 3)
    mixed = await store.limits.claim("ns", ["crm.sync", "other"], NOW, 4, "n1", LEASE, rules)
    assert sorted(c.timer.key for c in mixed.claimed) == [
        "crm.sync-8",
        "crm.sync-9",
        "other-0",
        "other-1",
    ]
