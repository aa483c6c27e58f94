"""Store conformance: an outcome lands only on the claim that produced it, and records when its
attempt truly began.

Every test runs against each backend (SQLite and PostgreSQL) and must behave identically.
"""

from __future__ import annotations

from datetime import timedelta

from storekit import NOW, new_timer

from duetime.model import FanOut, Finish, Outcome, Status
from duetime.store import Store

LEASE = NOW + timedelta(seconds=30)
CLAIM = NOW - timedelta(milliseconds=25)
"""A claim made ahead of the due instant, as workers make them..."""
AHEAD = NOW + timedelta(milliseconds=250)
"""...takes the rows due by this horizon, and records none of them as claimed at it."""


async def test_an_outcome_of_an_earlier_claim_of_the_same_attempt_is_refused(
    store: Store,
) -> None:
    """The same node claims the same attempt number twice (the first claim given back, as a
    database crash that forgot it would): the first claim's outcome must not land on the
    second."""
    await store.put_timers([new_timer("k", NOW, type="t")], "error", NOW)
    (first,) = await store.claim_due("ns", None, NOW, 10, "n1", LEASE)
    assert first.timer.claim_token is not None
    forgotten = Finish(first.timer.id, 1, Outcome.RELEASED, claim_token=first.timer.claim_token)
    assert await store.finish([forgotten], "n1", NOW) == set()
    (second,) = await store.claim_due("ns", None, NOW, 10, "n1", LEASE)
    assert (second.timer.id, second.attempt) == (first.timer.id, first.attempt)
    assert second.timer.claim_token != first.timer.claim_token

    stale = Finish(first.timer.id, 1, Outcome.DONE, claim_token=first.timer.claim_token)
    assert await store.finish([stale], "n1", NOW) == {first.timer.id}
    timer = await store.get_timer("ns", "k")
    assert timer is not None
    assert timer.status is Status.RUNNING

    stale_fan = FanOut(first.timer.id, 1, "k", ("a", "b"), first.timer.claim_token)
    assert await store.fan_out([stale_fan], "n1", NOW) == {first.timer.id}
    assert await store.get_timer("ns", "k@a") is None

    own = Finish(second.timer.id, 1, Outcome.DONE, claim_token=second.timer.claim_token)
    assert await store.finish([own], "n1", NOW) == set()
    timer = await store.get_timer("ns", "k")
    assert timer is not None
    assert timer.status is Status.DONE


async def test_a_transactional_completion_of_an_earlier_claim_is_refused(store: Store) -> None:
    await store.put_timers([new_timer("k", NOW, type="t")], "error", NOW)
    (first,) = await store.claim_due("ns", None, NOW, 10, "n1", LEASE)
    token = first.timer.claim_token
    await store.finish([Finish(first.timer.id, 1, Outcome.RELEASED, claim_token=token)], "n1", NOW)
    (second,) = await store.claim_due("ns", None, NOW, 10, "n1", LEASE)
    ran: list[object] = []
    ours = await store.transactions.complete_in_transaction(
        first.timer.id, 1, "n1", NOW, ran.append, claim_token=token
    )
    assert ours is False
    assert ran == []
    ours = await store.transactions.complete_in_transaction(
        second.timer.id, 1, "n1", NOW, ran.append, claim_token=second.timer.claim_token
    )
    assert ours is True
    assert len(ran) == 1


async def test_an_attempt_records_when_its_handler_began_not_the_claims_instant(
    store: Store,
) -> None:
    """Claimed ahead, started at the due instant: the attempt's start and the timer's fired_at
    are the start, after the claim and before the end."""
    await store.put_timers(
        [new_timer("a", NOW, type="t"), new_timer("b", NOW, type="t")], "error", NOW
    )
    claimed = await store.claim_due("ns", None, CLAIM, 10, "n1", LEASE, due_by=AHEAD)
    began = NOW + timedelta(milliseconds=1)
    ended = NOW + timedelta(milliseconds=180)
    finishes = [
        Finish(c.timer.id, 1, outcome, claim_token=c.timer.claim_token, started_at=began, **more)
        for c, (outcome, more) in zip(
            sorted(claimed, key=lambda c: c.timer.key),
            [(Outcome.DONE, {}), (Outcome.RETRY, {"error": "boom", "run_at": LEASE})],
            strict=True,
        )
    ]
    assert await store.finish(finishes, "n1", ended) == set()
    for key in ("a", "b"):
        timer = await store.get_timer("ns", key)
        assert timer is not None
        assert timer.fired_at == began, key
        (attempt,) = await store.list_attempts(timer.id)
        assert attempt.started_at == began, key
        assert attempt.finished_at == ended, key
        assert attempt.claimed_at == CLAIM, key
        assert attempt.claimed_at <= attempt.started_at <= attempt.finished_at


async def test_a_second_attempt_keeps_the_first_ones_fired_at(store: Store) -> None:
    await store.put_timers([new_timer("k", NOW, type="t")], "error", NOW)
    (first,) = await store.claim_due("ns", None, CLAIM, 10, "n1", LEASE, due_by=AHEAD)
    began = NOW + timedelta(milliseconds=2)
    retry = Finish(
        first.timer.id,
        1,
        Outcome.RETRY,
        error="e",
        run_at=NOW + timedelta(seconds=1),
        claim_token=first.timer.claim_token,
        started_at=began,
    )
    await store.finish([retry], "n1", NOW + timedelta(milliseconds=5))
    later = NOW + timedelta(seconds=1)
    (second,) = await store.claim_due("ns", None, later, 10, "n1", LEASE + timedelta(seconds=1))
    again = later + timedelta(milliseconds=3)
    done = Finish(
        second.timer.id, 2, Outcome.DONE, claim_token=second.timer.claim_token, started_at=again
    )
    await store.finish([done], "n1", later + timedelta(milliseconds=9))
    timer = await store.get_timer("ns", "k")
    assert timer is not None
    assert timer.fired_at == began
    attempts = await store.list_attempts(timer.id)
    assert [a.started_at for a in attempts] == [began, again]


async def test_a_fan_out_records_its_own_instant_as_the_start(store: Store) -> None:
    await store.put_timers([new_timer("k", NOW, type="t")], "error", NOW)
    (claimed,) = await store.claim_due("ns", None, CLAIM, 10, "n1", LEASE, due_by=AHEAD)
    handed = NOW + timedelta(milliseconds=4)
    fan = FanOut(claimed.timer.id, 1, "k", ("a",), claimed.timer.claim_token)
    assert await store.fan_out([fan], "n1", handed) == set()
    timer = await store.get_timer("ns", "k")
    assert timer is not None
    assert timer.fired_at == handed
    (attempt,) = await store.list_attempts(timer.id)
    assert attempt.started_at == handed


async def test_a_heartbeat_of_an_earlier_claim_does_not_renew_a_later_one(store: Store) -> None:
    """The same node holds the same attempt number under two claims (the first given back, as a
    database crash that forgot it would): renewing the first claim's lease must leave the
    second's to run out, and renewing the second's renews it."""
    await store.put_timers([new_timer("k", NOW, type="t")], "error", NOW)
    (first,) = await store.claim_due("ns", None, NOW, 10, "n1", LEASE)
    token = first.timer.claim_token
    await store.finish([Finish(first.timer.id, 1, Outcome.RELEASED, claim_token=token)], "n1", NOW)
    (second,) = await store.claim_due("ns", None, NOW, 10, "n1", LEASE)
    assert (second.timer.id, second.attempt) == (first.timer.id, 1)
    later = LEASE + timedelta(minutes=1)

    assert await store.heartbeat("n1", NOW, later, [(first.timer.id, token)]) == 0
    timer = await store.get_timer("ns", "k")
    assert timer is not None
    assert timer.lease_expires_at == LEASE

    own = [(second.timer.id, second.timer.claim_token)]
    assert await store.heartbeat("n1", NOW, later, own) == 1
    timer = await store.get_timer("ns", "k")
    assert timer is not None
    assert timer.lease_expires_at == later


async def test_a_lost_attempt_shows_its_claim_and_no_start(store: Store) -> None:
    """A node claims ahead and is lost before it reports a start: the rescued attempt keeps its
    claim's instant as claimed_at and shows no start, and the timer has not fired (no start was
    ever known), instead of showing the planned instant as if it had started then."""
    await store.put_timers([new_timer("k", NOW, type="t", max_attempts=2)], "error", NOW)
    (claimed,) = await store.claim_due("ns", None, CLAIM, 10, "n1", LEASE, due_by=AHEAD)
    (running,) = await store.list_attempts(claimed.timer.id)
    assert (running.started_at, running.finished_at) == (None, None)
    rescued_at = LEASE + timedelta(seconds=1)
    assert await store.rescue(rescued_at) == [claimed.timer.id]
    (lost,) = await store.list_attempts(claimed.timer.id)
    assert (lost.outcome, lost.started_at, lost.finished_at) == (Outcome.LOST, None, rescued_at)
    assert lost.to_dict()["started_at"] is None
    timer = await store.get_timer("ns", "k")
    assert timer is not None
    assert (timer.status, timer.fired_at) == (Status.RETRYING, None)
    assert (running.claimed_at, lost.claimed_at) == (CLAIM, CLAIM)


async def test_a_claim_records_its_own_instant_not_the_horizon_it_claimed_up_to(
    store: Store,
) -> None:
    """A claim made at CLAIM takes the rows due by AHEAD, up to its look-ahead later; each
    attempt reads as claimed at CLAIM, while running and once ended, so that it is claimed
    before it starts and starts before it ends (the first attempt that completes its timer is
    kept on the timer's row on PostgreSQL: both ways are read)."""
    due = NOW + timedelta(milliseconds=100)
    await store.put_timers(
        [new_timer("a", due, type="t"), new_timer("b", due, type="t")], "error", NOW
    )
    claimed = await store.claim_due("ns", None, CLAIM, 10, "n1", LEASE, due_by=AHEAD)
    assert sorted(c.timer.key for c in claimed) == ["a", "b"]
    for c in claimed:
        (running,) = await store.list_attempts(c.timer.id)
        assert running.claimed_at == CLAIM
    ended = due + timedelta(milliseconds=3)
    finishes = [
        Finish(c.timer.id, 1, outcome, claim_token=c.timer.claim_token, started_at=due, **more)
        for c, (outcome, more) in zip(
            sorted(claimed, key=lambda c: c.timer.key),
            [(Outcome.DONE, {}), (Outcome.DEAD, {"error": "boom"})],
            strict=True,
        )
    ]
    assert await store.finish(finishes, "n1", ended) == set()
    for c in claimed:
        (attempt,) = await store.list_attempts(c.timer.id)
        assert (attempt.claimed_at, attempt.started_at, attempt.finished_at) == (CLAIM, due, ended)
