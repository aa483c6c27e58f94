"""Store conformance, flow control: limits and pauses kept as rows, and claims that obey them.

Every test runs against each backend (SQLite and PostgreSQL) and must behave identically. The
rate's clock is the database's (a real clock), so rates here are slow enough that no token comes
back while a test runs.
"""

from __future__ import annotations

from datetime import timedelta

from storekit import NOW, new_timer

from duetime.model import Finish, Outcome, Status
from duetime.model.flow_rules import FlowPlan, FlowRule, plan_of
from duetime.store import Store
from duetime.timemath.ratelimit import Rate

LEASE = NOW + timedelta(seconds=30)
HOURLY = Rate(1, timedelta(hours=1))


async def put_due(store: Store, type: str, count: int, prefix: str = "") -> None:
    await store.put_timers(
        [
            new_timer(f"{prefix}{type}-{i}", NOW - timedelta(seconds=count - i), type=type)
            for i in range(count)
        ],
        "error",
        NOW - timedelta(minutes=1),
    )


async def plan(store: Store) -> FlowPlan:
    return plan_of(await store.limits.list_rules("ns"))


async def test_rules_are_rows_a_limit_and_a_pause_share_one(store: Store) -> None:
    limits = store.limits
    assert await limits.list_rules("ns") == []
    rule = FlowRule("ns", "email.*", concurrency=3, rate=Rate(100, timedelta(seconds=1)))
    stored = await limits.put_limit(rule, NOW)
    assert (stored.pattern, stored.concurrency, stored.rate, stored.burst) == (
        "email.*",
        3,
        Rate(100, timedelta(seconds=1)),
        None,
    )
    assert stored.effective_burst == 5  # 50 ms of starts at 100/s
    paused = await limits.set_paused("ns", "email.*", True, NOW)
    assert paused is not None
    assert paused.paused
    assert paused.concurrency == 3
    assert await limits.remove_limit("ns", "email.*", NOW)
    (only_pause,) = await limits.list_rules("ns")
    assert only_pause.paused
    assert not only_pause.limits
    assert not await limits.remove_limit("ns", "email.*", NOW)
    assert await limits.set_paused("ns", "email.*", False, NOW) is None  # nothing left: gone
    assert await limits.list_rules("ns") == []
    assert await limits.list_rules("other") == []


async def test_a_concurrency_limit_counts_running_attempts_of_its_types(store: Store) -> None:
    await store.limits.put_limit(FlowRule("ns", "crm.*", concurrency=2), NOW)
    await put_due(store, "crm.sync", 5)
    await put_due(store, "other", 3)
    first = await store.limits.claim("ns", None, NOW, 100, "n1", LEASE, await plan(store))
    by_type = sorted(c.timer.type for c in first.claimed)
    assert by_type == ["crm.sync"] * 2 + ["other"] * 3
    assert first.held == ("crm.*",)
    assert first.retry_at is not None
    again = await store.limits.claim("ns", None, NOW, 100, "n1", LEASE, await plan(store))
    assert again.claimed == []
    assert again.held == ("crm.*",)
    done = next(c for c in first.claimed if c.timer.type == "crm.sync")
    await store.finish([Finish(done.timer.id, done.attempt, Outcome.DONE)], "n1", NOW)
    third = await store.limits.claim("ns", None, NOW, 100, "n1", LEASE, await plan(store))
    assert [c.timer.key for c in third.claimed] == ["crm.sync-2"]  # oldest held first
    (status,) = (await store.limits.status("ns", NOW)).items
    assert (status.running, status.held) == (2, 2)
    assert status.oldest_held_at == NOW - timedelta(seconds=2)


async def test_a_rate_grants_its_burst_then_holds_back(store: Store) -> None:
    await store.limits.put_limit(FlowRule("ns", "mail", rate=HOURLY, burst=3), NOW)
    await put_due(store, "mail", 5)
    first = await store.limits.claim("ns", None, NOW, 100, "n1", LEASE, await plan(store))
    assert [c.timer.key for c in first.claimed] == ["mail-0", "mail-1", "mail-2"]
    assert first.held == ("mail",)
    later = await store.limits.claim("ns", None, NOW, 100, "n1", LEASE, await plan(store))
    assert later.claimed == []
    assert later.retry_at is not None
    for key in ("mail-3", "mail-4"):
        timer = await store.get_timer("ns", key)
        assert timer is not None
        assert timer.status is Status.SCHEDULED
    # The next due instant a worker sleeps until leaves the held types out.
    assert await store.limits.next_run_at("ns", None, await plan(store), later.held) is None


async def test_a_pause_holds_its_types_and_resume_lets_them_go_oldest_first(store: Store) -> None:
    await store.limits.set_paused("ns", "report.*", True, NOW)
    await put_due(store, "report.daily", 3)
    await put_due(store, "ping", 1)
    paused = await store.limits.claim("ns", None, NOW, 100, "n1", LEASE, await plan(store))
    assert [c.timer.type for c in paused.claimed] == ["ping"]
    assert await store.limits.next_run_at("ns", None, await plan(store), ()) is None
    (status,) = (await store.limits.status("ns", NOW)).items
    assert status.held == 3
    await store.limits.set_paused("ns", "report.*", False, NOW)
    resumed = await store.claim_due("ns", None, NOW, 100, "n1", LEASE)
    assert [c.timer.key for c in resumed] == [f"report.daily-{i}" for i in range(3)]


async def test_the_most_specific_limit_governs_a_type(store: Store) -> None:
    await store.limits.put_limit(FlowRule("ns", "email.*", concurrency=1), NOW)
    await store.limits.put_limit(FlowRule("ns", "email.welcome", concurrency=3), NOW)
    await put_due(store, "email.welcome", 4)
    await put_due(store, "email.digest", 4)
    got = await store.limits.claim("ns", None, NOW, 100, "n1", LEASE, await plan(store))
    counts = {
        t: sum(c.timer.type == t for c in got.claimed) for t in ("email.welcome", "email.digest")
    }
    assert counts == {"email.welcome": 3, "email.digest": 1}
    assert set(got.held) == {"email.*", "email.welcome"}


async def test_a_claim_under_rules_keeps_the_node_subscriptions(store: Store) -> None:
    await store.limits.put_limit(FlowRule("ns", "a.*", concurrency=10), NOW)
    await put_due(store, "a.x", 2)
    await put_due(store, "b", 2)
    got = await store.limits.claim("ns", ["b"], NOW, 100, "n1", LEASE, await plan(store))
    assert sorted(c.timer.type for c in got.claimed) == ["b", "b"]


async def test_a_partitioned_concurrency_applies_per_key(store: Store) -> None:
    await store.limits.put_limit(
        FlowRule("ns", "sync", concurrency=1, partition_by="payload.user"), NOW
    )
    await store.put_timers(
        [
            new_timer(f"s-{i}", NOW - timedelta(seconds=10 - i), type="sync", payload={"user": u})
            for i, u in enumerate(["ann", "ann", "bob", "ann", "cy", "bob"])
        ],
        "error",
        NOW - timedelta(minutes=1),
    )
    first = await store.limits.claim("ns", None, NOW, 100, "n1", LEASE, await plan(store))
    assert [c.timer.key for c in first.claimed] == ["s-0", "s-2", "s-4"]  # one per user
    assert first.held == ("sync",)
    again = await store.limits.claim("ns", None, NOW, 100, "n1", LEASE, await plan(store))
    assert again.claimed == []
    assert again.held == ("sync",)
    ann = first.claimed[0]
    await store.finish([Finish(ann.timer.id, ann.attempt, Outcome.DONE)], "n1", NOW)
    third = await store.limits.claim("ns", None, NOW, 100, "n1", LEASE, await plan(store))
    assert [c.timer.key for c in third.claimed] == ["s-1"]


async def test_a_subject_partition_and_a_key_without_value(store: Store) -> None:
    await store.limits.put_limit(FlowRule("ns", "p", concurrency=1, partition_by="subject"), NOW)
    await store.put_timers(
        [
            new_timer(f"p-{i}", NOW - timedelta(seconds=10 - i), type="p", subject=s)
            for i, s in enumerate(["u1", "u1", None, None, "u2"])
        ],
        "error",
        NOW - timedelta(minutes=1),
    )
    got = await store.limits.claim("ns", None, NOW, 100, "n1", LEASE, await plan(store))
    assert [c.timer.key for c in got.claimed] == ["p-0", "p-2", "p-4"]  # no subject: one key


async def test_a_ruled_claim_records_its_own_instant_not_the_horizon(store: Store) -> None:
    """Under rules, the rows a limit grants and those no rule governs are taken up to the
    horizon ``due_by`` and read as claimed at the claim's own instant, before they start."""
    await store.limits.put_limit(FlowRule("ns", "crm.*", concurrency=10), NOW)
    due = NOW + timedelta(milliseconds=100)
    await store.put_timers(
        [new_timer("crm", due, type="crm.sync"), new_timer("free", due, type="other")],
        "error",
        NOW - timedelta(minutes=1),
    )
    ahead = NOW + timedelta(milliseconds=250)
    ruled = await store.limits.claim(
        "ns", None, NOW, 100, "n1", LEASE, await plan(store), due_by=ahead
    )
    assert sorted(c.timer.key for c in ruled.claimed) == ["crm", "free"]
    ended = due + timedelta(milliseconds=2)
    finishes = [
        Finish(c.timer.id, c.attempt, Outcome.RETRY, "e", run_at=LEASE, started_at=due)
        for c in ruled.claimed
    ]
    assert await store.finish(finishes, "n1", ended) == set()
    for c in ruled.claimed:
        (attempt,) = await store.list_attempts(c.timer.id)
        assert (attempt.claimed_at, attempt.started_at, attempt.finished_at) == (NOW, due, ended)
