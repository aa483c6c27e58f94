"""A write that has committed answers success even when its wake-up is lost after the commit.

The NOTIFY of the store's own writes goes out once their transaction has committed. Here the
server ends the connection the moment it is sent (the statement terminates its own backend, as a
restart would): every write path that notifies must still answer what it stored, not the plain
StoreUnavailable that promises nothing was (a lost hint costs a re-check, never work). The
kept timers a keyed write reads back after its commit are the same: a failed read says the
outcome is unknown once anything was written.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta

import pytest
from storekit import NOW, StoreFactory, new_timer

from duetime import AsyncApp
from duetime.errors import CommitOutcomeUnknown, StoreUnavailable
from duetime.model import FanOut, Finish, Outcome, Status
from duetime.model.deliveries import delivery_key
from duetime.store import Store
from duetime.store.postgres import notices, write_pipeline
from duetime.store.postgres.store import PostgresStore
from duetime.store.postgres.write_plan import PutCall

pytestmark = pytest.mark.usefixtures("pg_schema")

LEASE = NOW + timedelta(seconds=30)
LOST = "SELECT pg_terminate_backend(pg_backend_pid()), %(channel)s::text, %(payload)s::text"
"""The NOTIFY as a restart meets it: the server ends the connection it came on."""


async def keyed_one(store: Store) -> list[str]:
    """One timer under the caller's key: the statement, then the NOTIFY on its own."""
    (result,) = await store.put_timers([new_timer("k", NOW, type="t")], "error", NOW)
    return ["k"] if result.action == "created" else []


async def keyed_several(store: Store) -> list[str]:
    results = await store.put_timers(
        [new_timer(key, NOW, type="t") for key in ("a", "b", "c")], "update", NOW
    )
    return [r.timer.key for r in results if r.action == "created"]


async def drawn_keys(store: Store) -> list[str]:
    results = await store.put_timers([new_timer(None, NOW, type="t")] * 3, "error", NOW)
    return [r.timer.key for r in results if r.action == "created"]


async def many(store: Store) -> list[str]:
    """More than one chunk: a transaction of its own, its NOTIFY after the commit."""
    keys = [f"m{i}" for i in range(1_100)]
    results = await store.put_timers([new_timer(key, NOW, type="t") for key in keys], "keep", NOW)
    return [r.timer.key for r in results if r.action == "created"]


WRITES: dict[str, Callable[[Store], Awaitable[list[str]]]] = {
    "one keyed timer": keyed_one,
    "several keyed timers": keyed_several,
    "drawn keys": drawn_keys,
    "more than a chunk": many,
}


@pytest.mark.parametrize("write", list(WRITES))
async def test_a_timer_write_whose_notify_is_lost_answers_what_it_stored(
    pg_url: str,
    open_store: StoreFactory,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    write: str,
) -> None:
    store = await open_store(pg_url)
    monkeypatch.setitem(notices.Q, "notify_after_commit", LOST)
    with caplog.at_level(logging.WARNING, logger="duetime.store.postgres"):
        created = await WRITES[write](store)
    assert created
    assert "the commit stands" in caplog.text  # the NOTIFY was sent and lost
    for key in created:
        stored = await store.get_timer("ns", key)
        assert stored is not None
        assert stored.status is Status.SCHEDULED


async def test_cancel_run_now_replay_and_outcomes_whose_notify_is_lost_answer_success(
    pg_url: str,
    open_store: StoreFactory,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = await open_store(pg_url)
    later = NOW + timedelta(hours=1)
    await store.put_timers(
        [new_timer("c", later, type="t"), new_timer("r", later, type="t")], "error", NOW
    )
    await store.put_timers(
        [new_timer("d", NOW, type="t", max_attempts=1), new_timer("e", NOW, type="t")],
        "error",
        NOW,
    )
    claimed = {c.timer.key: c for c in await store.claim_due("ns", None, NOW, 10, "n1", LEASE)}
    d, e = claimed["d"].timer, claimed["e"].timer
    finishes = [
        Finish(d.id, 1, Outcome.DEAD, "e", claim_token=d.claim_token),
        Finish(e.id, 1, Outcome.RETRY, "e", run_at=NOW, claim_token=e.claim_token),
    ]
    monkeypatch.setitem(notices.Q, "notify_after_commit", LOST)
    with caplog.at_level(logging.WARNING, logger="duetime.store.postgres"):
        assert (await store.cancel("ns", "c", NOW)).status is Status.CANCELLED
        assert (await store.run_now("ns", "r", NOW)).run_at == NOW
        assert await store.finish(finishes, "n1", NOW) == set()  # e retries: a NOTIFY
        assert (await store.replay("ns", "d", NOW)).status is Status.SCHEDULED
    assert caplog.text.count("the commit stands") == 3  # run_now, the retry, replay
    due = await store.claim_due("ns", None, NOW, 10, "n1", LEASE)
    assert sorted(c.timer.key for c in due) == ["d", "e", "r"]


async def test_kept_timers_unread_after_a_commit_leave_the_outcome_unknown(
    pg_url: str, open_store: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two callers in one commit, one timer created and one kept: reading the kept one back
    fails after the commit. The created timer is stored: the answer says the outcome is
    unknown, never that nothing was written. Kept alone (nothing written), it may say so."""
    store = await open_store(pg_url)
    assert isinstance(store, PostgresStore)
    await store.put_timers([new_timer("old", NOW, type="t")], "error", NOW)
    monkeypatch.setitem(
        write_pipeline.Q,
        "get_timers",
        "SELECT pg_terminate_backend(pg_backend_pid()), %(keys)s::text[]",
    )
    calls = [
        PutCall([new_timer("new", NOW, type="t")], "keep", NOW),
        PutCall([new_timer("old", NOW, type="t")], "keep", NOW),
    ]
    with pytest.raises(CommitOutcomeUnknown):
        await store.writes.at_once(calls)
    assert await store.get_timer("ns", "new") is not None
    with pytest.raises(StoreUnavailable) as alone:
        await store.writes.at_once([calls[1]])
    assert not alone.value.outcome_unknown


async def test_fan_outs_rescues_groups_and_schedules_whose_notify_is_lost_answer_success(
    pg_url: str,
    open_store: StoreFactory,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = await open_store(pg_url)
    assert isinstance(store, PostgresStore)
    await store.put_timers(
        [new_timer("fan", NOW, type="t"), new_timer("gone", NOW, type="t")], "error", NOW
    )
    claimed = {c.timer.key: c for c in await store.claim_due("ns", None, NOW, 10, "n1", LEASE)}
    fan = claimed["fan"].timer
    monkeypatch.setitem(notices.Q, "notify_after_commit", LOST)
    with caplog.at_level(logging.WARNING, logger="duetime.store.postgres"):
        out = FanOut(fan.id, 1, "fan", ("a", "b"), fan.claim_token)
        assert await store.fan_out([out], "n1", NOW) == set()
        assert await store.rescue(LEASE + timedelta(seconds=1)) == [claimed["gone"].timer.id]
        calls = [
            PutCall([new_timer("g1", NOW, type="t")], "keep", NOW),
            PutCall([new_timer("g2", NOW, type="t")], "error", NOW),
        ]
        answers = await store.writes.grouped(calls)
        assert [[r.action for r in a] for a in answers if isinstance(a, list)] == [
            ["created"],
            ["created"],
        ]
    assert caplog.text.count("the commit stands") == 3
    for key in ("g1", "g2", delivery_key("fan", "a"), delivery_key("fan", "b")):
        assert await store.get_timer("ns", key) is not None, key
    retried = await store.get_timer("ns", "gone")
    assert retried is not None
    assert retried.status is Status.RETRYING


def test_a_schedule_whose_notify_is_lost_is_added_and_answered(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> None:
        async with AsyncApp(pg_url, namespace="ns") as app:
            monkeypatch.setitem(notices.Q, "notify_after_commit", LOST)
            with caplog.at_level(logging.WARNING, logger="duetime.store.postgres"):
                await app.schedules.add("nightly", "report", cron="0 3 * * *")
            assert (await app.schedules.get("nightly")).name == "nightly"

    asyncio.run(main())
    assert "the commit stands" in caplog.text
