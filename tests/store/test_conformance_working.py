"""Store conformance, working side: claims, fenced finishes, rescue, leases and heartbeats.

Every test runs against each backend (SQLite and PostgreSQL) and must behave identically.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

import pytest
from storekit import NOW, StoreFactory, new_timer

from duetime.model import Claimed, Finish, Node, Outcome, Status
from duetime.store import Store

LEASE = NOW + timedelta(seconds=30)
SOON = NOW + timedelta(seconds=10)


async def claim_one(store: Store, key: str, node: str = "n1") -> Claimed:
    timer = await store.get_timer("ns", key)
    assert timer is not None
    (claimed,) = await store.claim_due("ns", [timer.type], NOW, 10, node, LEASE)
    return claimed


async def test_claim_takes_due_timers_oldest_first_and_opens_attempts(store: Store) -> None:
    offsets = {"c": 3, "a": 1, "late": 60, "b": 2, "d": 0}
    await store.put_timers(
        [new_timer(k, NOW - timedelta(seconds=10 - v), type="t") for k, v in offsets.items()],
        "error",
        NOW - timedelta(minutes=1),
    )
    await store.put_timers([new_timer("other-ns", namespace="other", type="t")], "error", NOW)
    claimed = await store.claim_due("ns", None, NOW, 10, "n1", LEASE)
    assert [c.timer.key for c in claimed] == ["d", "a", "b", "c"]
    for item in claimed:
        timer = item.timer
        assert item.attempt == timer.attempts == 1
        assert timer.status is Status.RUNNING
        assert (timer.lease_owner, timer.lease_expires_at) == ("n1", LEASE)
        # running: claimed now, its start not known until its outcome reports it
        assert timer.updated_at == NOW
        assert timer.fired_at is None
        assert await store.get_timer("ns", timer.key) == timer
        (attempt,) = await store.list_attempts(timer.id)
        assert (attempt.number, attempt.node_id, attempt.claimed_at) == (1, "n1", NOW)
        assert attempt.started_at is None
        assert (attempt.finished_at, attempt.outcome, attempt.error) == (None, None, None)
    assert await store.claim_due("ns", None, NOW, 10, "n1", LEASE) == []
    late = await store.claim_due("ns", None, NOW + timedelta(minutes=1), 10, "n1", LEASE)
    assert [c.timer.key for c in late] == ["late"]


async def test_a_claimed_timer_carries_every_stored_field(store: Store) -> None:
    """The claim decodes its rows on its own path (the busiest one); what it hands the handler
    is the row as stored, every optional field included, after a retry as on a first attempt."""
    full = new_timer(
        "full",
        NOW - timedelta(seconds=5),
        type="t",
        payload={"nested": [1, "two", {"three": None}], "text": "grüße, 東京 🎉"},
        subject="user-1",
        correlation_id="corr-1",
        expires_after=timedelta(hours=2),
        local=datetime(2025, 3, 9, 2, 30),
        timezone="America/New_York",
        disambiguation="later",
        producer="api",
    )
    await store.put_timers([full], "error", NOW - timedelta(minutes=1))
    (first,) = await store.claim_due("ns", None, NOW, 10, "n1", LEASE)
    assert await store.get_timer("ns", "full") == first.timer
    assert (first.timer.subject, first.timer.local, first.timer.producer) == (
        "user-1",
        datetime(2025, 3, 9, 2, 30),
        "api",
    )
    retry = Finish(first.timer.id, 1, Outcome.RETRY, error="boom", run_at=NOW)
    assert await store.finish([retry], "n1", NOW) == set()
    (second,) = await store.claim_due("ns", None, NOW, 10, "n2", LEASE)
    assert await store.get_timer("ns", "full") == second.timer
    assert (second.attempt, second.timer.status, second.timer.last_error) == (
        2,
        Status.RUNNING,
        "boom",
    )


async def test_claim_respects_the_limit(store: Store) -> None:
    await store.put_timers(
        [new_timer(f"k{i}", NOW - timedelta(seconds=i), type="t") for i in range(5)], "error", NOW
    )
    first = await store.claim_due("ns", None, NOW, 2, "n1", LEASE)
    second = await store.claim_due("ns", None, NOW, 2, "n1", LEASE)
    third = await store.claim_due("ns", None, NOW, 2, "n1", LEASE)
    assert [[c.timer.key for c in batch] for batch in (first, second, third)] == [
        ["k4", "k3"],
        ["k2", "k1"],
        ["k0"],
    ]


async def test_claim_takes_only_the_given_types(store: Store) -> None:
    await store.put_timers(
        [new_timer("a", type="x"), new_timer("b", type="y"), new_timer("c", type="z")],
        "error",
        NOW,
    )
    assert await store.claim_due("ns", [], NOW, 10, "n1", LEASE) == []
    some = await store.claim_due("ns", ["x", "z", "absent"], NOW, 10, "n1", LEASE)
    assert sorted(c.timer.key for c in some) == ["a", "c"]
    rest = await store.claim_due("ns", None, NOW, 10, "n1", LEASE)
    assert [c.timer.key for c in rest] == ["b"]


async def test_next_run_at_is_the_earliest_pending(store: Store) -> None:
    assert await store.next_run_at("ns", None) is None
    await store.put_timers(
        [
            new_timer("now", type="x"),
            new_timer("soon", SOON, type="y"),
            new_timer("later", LEASE, type="x"),
        ],
        "error",
        NOW,
    )
    assert await store.next_run_at("ns", None) == NOW
    assert await store.next_run_at("ns", ["y"]) == SOON
    assert await store.next_run_at("ns", []) is None
    assert await store.next_run_at("other", None) is None
    await store.claim_due("ns", ["x"], NOW, 10, "n1", LEASE)  # running work is not pending
    assert await store.next_run_at("ns", ["x"]) == LEASE


async def test_concurrent_claims_never_share_a_timer(
    store: Store, make_store: StoreFactory
) -> None:
    other = await make_store()
    count = 60
    await store.put_timers(
        [new_timer(f"k{i:02}", NOW - timedelta(milliseconds=i), type="t") for i in range(count)],
        "error",
        NOW,
    )

    async def drain(claimer: Store, node: str) -> list[int]:
        ids: list[int] = []
        while batch := await claimer.claim_due("ns", None, NOW, 7, node, LEASE):
            ids += [c.timer.id for c in batch]
            await asyncio.sleep(0)
        return ids

    results = await asyncio.gather(*(drain(s, f"n{i}") for i, s in enumerate([store, other] * 3)))
    claimed = [timer_id for ids in results for timer_id in ids]
    assert len(claimed) == len(set(claimed)) == count
    counts = await store.count_by_status("ns")
    assert counts[Status.RUNNING] == count


async def test_finish_is_fenced_by_attempt_and_owner(store: Store) -> None:
    await store.put_timers([new_timer("a")], "error", NOW)
    claimed = await claim_one(store, "a")
    before = await store.get_timer("ns", "a")
    tid = claimed.timer.id
    wrong_attempt = Finish(tid, claimed.attempt + 1, Outcome.DONE)
    assert await store.finish([wrong_attempt], "n1", SOON) == {tid}
    assert await store.finish([Finish(tid, claimed.attempt, Outcome.DONE)], "n2", SOON) == {tid}
    assert await store.get_timer("ns", "a") == before
    (attempt,) = await store.list_attempts(tid)
    assert attempt.outcome is None
    assert await store.finish([Finish(tid, claimed.attempt, Outcome.DONE)], "n1", SOON) == set()
    assert await store.finish([Finish(tid, claimed.attempt, Outcome.DONE)], "n1", SOON) == {tid}


async def test_finish_applies_a_batch_and_reports_only_the_lost(store: Store) -> None:
    await store.put_timers([new_timer(k, type="t") for k in "abc"], "error", NOW)
    a, b, c = await store.claim_due("ns", None, NOW, 10, "n1", LEASE)
    lost = await store.finish(
        [
            Finish(a.timer.id, 1, Outcome.DONE),
            Finish(b.timer.id, 2, Outcome.DONE),
            Finish(c.timer.id, 1, Outcome.RETRY, error="e", run_at=SOON),
        ],
        "n1",
        NOW,
    )
    assert lost == {b.timer.id}
    statuses = [(await store.get_timer("ns", k)) for k in "abc"]
    assert [t.status if t else None for t in statuses] == [
        Status.DONE,
        Status.RUNNING,
        Status.RETRYING,
    ]


async def test_done(store: Store) -> None:
    await store.put_timers([new_timer("a")], "error", NOW)
    claimed = await claim_one(store, "a")
    began = NOW + timedelta(milliseconds=3)
    await store.finish([Finish(claimed.timer.id, 1, Outcome.DONE, started_at=began)], "n1", SOON)
    timer = await store.get_timer("ns", "a")
    assert timer is not None
    assert timer.status is Status.DONE
    assert timer.completed_at == timer.updated_at == SOON
    assert timer.fired_at == began
    assert (timer.lease_owner, timer.lease_expires_at, timer.last_error) == (None, None, None)
    (attempt,) = await store.list_attempts(timer.id)
    assert (attempt.finished_at, attempt.outcome, attempt.error) == (SOON, Outcome.DONE, None)


async def test_retry_then_next_attempt(store: Store) -> None:
    await store.put_timers([new_timer("a")], "error", NOW)
    claimed = await claim_one(store, "a")
    retry_at = NOW + timedelta(minutes=1)
    trace = "Traceback (most recent call last):\n  ...\nValueError: boom\n"
    retried = Finish(
        claimed.timer.id, 1, Outcome.RETRY, "boom", retry_at, traceback=trace, started_at=NOW
    )
    await store.finish([retried], "n1", SOON)
    timer = await store.get_timer("ns", "a")
    assert timer is not None
    assert (timer.status, timer.attempts, timer.last_error) == (Status.RETRYING, 1, "boom")
    assert timer.run_at == retry_at
    assert timer.completed_at is None
    assert timer.lease_owner is None
    assert await store.claim_due("ns", None, SOON, 10, "n2", LEASE) == []
    (again,) = await store.claim_due("ns", None, retry_at, 10, "n2", retry_at + timedelta(30))
    assert again.attempt == 2
    assert again.timer.fired_at == NOW  # the first firing
    history = await store.list_attempts(timer.id)
    assert [(a.number, a.node_id, a.outcome, a.error, a.traceback) for a in history] == [
        (1, "n1", Outcome.RETRY, "boom", trace),
        (2, "n2", None, None, None),
    ]
    await store.finish([Finish(timer.id, 2, Outcome.DONE)], "n2", retry_at)
    done = await store.get_timer("ns", "a")
    assert done is not None
    assert (done.status, done.last_error) == (Status.DONE, None)


async def test_snooze_does_not_use_up_an_attempt(store: Store) -> None:
    await store.put_timers([new_timer("a", max_attempts=1)], "error", NOW)
    claimed = await claim_one(store, "a")
    wake = NOW + timedelta(hours=1)
    await store.finish([Finish(claimed.timer.id, 1, Outcome.SNOOZED, run_at=wake)], "n1", SOON)
    timer = await store.get_timer("ns", "a")
    assert timer is not None
    assert (timer.status, timer.attempts, timer.max_attempts) == (Status.SCHEDULED, 1, 2)
    assert timer.run_at == wake
    (attempt,) = await store.list_attempts(timer.id)
    assert attempt.outcome is Outcome.SNOOZED


@pytest.mark.parametrize(
    ("outcome", "status"),
    [
        (Outcome.DEAD, Status.DEAD),
        (Outcome.EXPIRED, Status.EXPIRED),
        (Outcome.CANCELLED, Status.CANCELLED),
    ],
)
async def test_final_outcomes(store: Store, outcome: Outcome, status: Status) -> None:
    await store.put_timers([new_timer("a")], "error", NOW)
    claimed = await claim_one(store, "a")
    await store.finish([Finish(claimed.timer.id, 1, outcome, error="why")], "n1", SOON)
    timer = await store.get_timer("ns", "a")
    assert timer is not None
    assert (timer.status, timer.last_error, timer.completed_at) == (status, "why", SOON)
    assert timer.lease_owner is None
    (attempt,) = await store.list_attempts(timer.id)
    assert (attempt.outcome, attempt.error, attempt.finished_at) == (outcome, "why", SOON)


async def test_released_work_goes_back_unstarted(store: Store) -> None:
    await store.put_timers([new_timer("a"), new_timer("b")], "error", NOW)
    first = await claim_one(store, "a")
    await store.finish([Finish(first.timer.id, 1, Outcome.RELEASED)], "n1", SOON)
    timer = await store.get_timer("ns", "a")
    assert timer is not None
    assert (timer.status, timer.attempts, timer.fired_at) == (Status.SCHEDULED, 0, None)
    assert timer.lease_owner is None
    assert await store.list_attempts(timer.id) == []

    second = await claim_one(store, "b")
    await store.finish(
        [Finish(second.timer.id, 1, Outcome.RETRY, "x", NOW, started_at=NOW)], "n1", NOW
    )
    again = await claim_one(store, "b")
    assert again.attempt == 2
    await store.finish([Finish(again.timer.id, 2, Outcome.RELEASED)], "n1", SOON)
    timer = await store.get_timer("ns", "b")
    assert timer is not None
    assert (timer.status, timer.attempts, timer.fired_at) == (Status.RETRYING, 1, NOW)
    assert [a.number for a in await store.list_attempts(timer.id)] == [1]


async def test_rescue_puts_expired_leases_back_to_work(store: Store) -> None:
    await store.put_timers([new_timer("a"), new_timer("b", max_attempts=1)], "error", NOW)
    a = await claim_one(store, "a")
    b = await claim_one(store, "b")
    heard: list[object] = []
    store.add_wakeup_listener(heard.append)
    assert await store.rescue(SOON) == []
    after = LEASE + timedelta(microseconds=1)
    assert sorted(await store.rescue(after)) == sorted([a.timer.id, b.timer.id])
    assert heard

    retrying = await store.get_timer("ns", "a")
    assert retrying is not None
    assert (retrying.status, retrying.run_at, retrying.completed_at) == (
        Status.RETRYING,
        after,
        None,
    )
    assert retrying.last_error == "lease expired: node n1 stopped renewing it"
    assert (retrying.lease_owner, retrying.lease_expires_at) == (None, None)
    (attempt,) = await store.list_attempts(a.timer.id)
    assert (attempt.outcome, attempt.finished_at) == (Outcome.LOST, after)
    assert attempt.error == "lease expired: node n1 stopped renewing it"

    dead = await store.get_timer("ns", "b")
    assert dead is not None
    assert (dead.status, dead.completed_at) == (Status.DEAD, after)
    (attempt,) = await store.list_attempts(b.timer.id)
    assert attempt.outcome is Outcome.LOST

    # The old owner comes back from its pause: its outcome is refused.
    assert await store.finish([Finish(a.timer.id, 1, Outcome.DONE)], "n1", after) == {a.timer.id}
    assert await store.rescue(after + timedelta(minutes=5)) == []
    (again,) = await store.claim_due("ns", None, after, 10, "n2", after + timedelta(seconds=30))
    assert (again.timer.key, again.attempt) == ("a", 2)


async def test_heartbeat_extends_only_the_nodes_own_leases(store: Store) -> None:
    started = NOW - timedelta(minutes=1)
    for node in ("n1", "n2"):
        await store.register_node(Node(node, "host", 1, started, started))
    await store.put_timers([new_timer(k) for k in "abc"], "error", NOW)
    await claim_one(store, "a", "n1")
    await claim_one(store, "b", "n1")
    await claim_one(store, "c", "n2")
    until = NOW + timedelta(minutes=2)
    ids = {k: t.id for k in "abc" if (t := await store.get_timer("ns", k))}
    # c is n2's, so not n1's to extend; b is n1's but not listed (its claim answer was lost),
    # so it is left to expire and be rescued
    assert await store.heartbeat("n1", SOON, until, [(ids["a"], None), (ids["c"], None)]) == 1
    leases = {k: (await store.get_timer("ns", k)) for k in "abc"}
    assert {k: t.lease_expires_at if t else None for k, t in leases.items()} == {
        "a": until,
        "b": LEASE,
        "c": LEASE,
    }
    nodes = {n.id: n for n in await store.list_nodes()}
    assert (nodes["n1"].heartbeat_at, nodes["n1"].in_flight) == (SOON, 2)
    assert (nodes["n2"].heartbeat_at, nodes["n2"].in_flight) == (started, 0)
    assert await store.heartbeat("n3", SOON, until, []) == 0


async def test_expire_leases_of_a_gone_node(store: Store) -> None:
    await store.put_timers([new_timer(k) for k in "abc"], "error", NOW)
    await claim_one(store, "a", "gone")
    await claim_one(store, "b", "gone")
    await claim_one(store, "c", "alive")
    assert await store.expire_leases_of("gone", SOON) == 2
    assert await store.expire_leases_of("gone", SOON) == 0
    assert len(await store.rescue(SOON + timedelta(microseconds=1))) == 2
    statuses = {k: t.status if (t := await store.get_timer("ns", k)) else None for k in "abc"}
    assert statuses == {"a": Status.RETRYING, "b": Status.RETRYING, "c": Status.RUNNING}


async def test_rescue_never_moves_a_row_claimed_ahead_before_its_instant(store: Store) -> None:
    """A row claimed ahead of its instant (held by its node until then) whose node is gone
    retries at that instant, not at the rescue's: another node must not start it early."""
    due = NOW + timedelta(seconds=2)
    await store.put_timers([new_timer("ahead", due), new_timer("due", NOW)], "error", NOW)
    claimed = await store.claim_due("ns", None, NOW, 10, "gone", LEASE, due_by=due)
    assert sorted(c.timer.key for c in claimed) == ["ahead", "due"]
    found = NOW + timedelta(milliseconds=100)
    assert await store.expire_leases_of("gone", found) == 2
    rescued_at = found + timedelta(microseconds=1)
    assert len(await store.rescue(rescued_at)) == 2
    ahead, overdue = await store.get_timer("ns", "ahead"), await store.get_timer("ns", "due")
    assert ahead is not None
    assert overdue is not None
    assert (ahead.status, ahead.run_at) == (Status.RETRYING, due)
    assert (overdue.status, overdue.run_at) == (Status.RETRYING, rescued_at)
    soon = rescued_at + timedelta(milliseconds=1)
    (taken,) = await store.claim_due("ns", None, soon, 10, "n2", soon + timedelta(seconds=30))
    assert (taken.timer.key, taken.attempt) == ("due", 2)
    (again,) = await store.claim_due("ns", None, due, 10, "n2", due + timedelta(seconds=30))
    assert (again.timer.key, again.attempt, again.timer.run_at) == ("ahead", 2, due)
