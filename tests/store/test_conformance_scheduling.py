"""Store conformance, scheduling side: put/upsert/keep/error, get, list, cancel, replay, counts.

Every test runs against each backend (SQLite and PostgreSQL) and must behave identically.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest
from storekit import NOW, new_timer

import duetime.store.postgres.write_pipeline
import duetime.store.sqlite.store
import duetime.store.sqlite.writes
from duetime import validation
from duetime.errors import AlreadyExists, Conflict, InvalidInput, NotFound
from duetime.model import Finish, NewTimer, OnConflict, Outcome, Status, TimerFilter
from duetime.store import Store

LATER = NOW + timedelta(minutes=5)


async def fire(
    store: Store,
    key: str,
    outcome: Outcome,
    error: str | None = None,
    run_at: datetime | None = None,
) -> None:
    """Claim ``key`` (due now) and finish its attempt with ``outcome``."""
    timer = await store.get_timer("ns", key)
    assert timer is not None
    claimed = await store.claim_due("ns", [timer.type], timer.run_at, 100, "n1", LATER)
    (item,) = [c for c in claimed if c.timer.key == key]
    finish = Finish(
        item.timer.id, item.attempt, outcome, error=error, run_at=run_at, started_at=timer.run_at
    )
    assert await store.finish([finish], "n1", NOW) == set()


async def test_put_creates_and_answers_in_input_order(store: Store) -> None:
    local = datetime(2025, 3, 1, 21, 0)
    results = await store.put_timers(
        [
            new_timer("b", payload={"nested": [1, 2.5, "ü", None, True]}, subject="user-1"),
            new_timer(
                "a",
                LATER,
                correlation_id="corr",
                expires_after=timedelta(hours=1, microseconds=7),
                local=local,
                timezone="Asia/Tokyo",
                disambiguation="later",
                max_attempts=9,
            ),
        ],
        "update",
        NOW,
    )
    assert [(r.action, r.timer.key) for r in results] == [("created", "b"), ("created", "a")]
    b, a = (r.timer for r in results)
    assert b.payload == {"nested": [1, 2.5, "ü", None, True]}
    assert b.subject == "user-1"
    assert (b.status, b.attempts, b.max_attempts) == (Status.SCHEDULED, 0, 3)
    assert b.due_at == b.run_at == NOW
    assert b.registered_at == b.updated_at == NOW
    assert (b.fired_at, b.completed_at, b.last_error, b.lease_owner) == (None, None, None, None)
    assert a.due_at == a.run_at == LATER
    assert a.correlation_id == "corr"
    assert a.expires_after == timedelta(hours=1, microseconds=7)
    assert (a.local, a.timezone, a.disambiguation) == (local, "Asia/Tokyo", "later")
    assert a.max_attempts == 9
    assert await store.get_timer("ns", "a") == a
    assert await store.get_timer("ns", "b") == b
    assert b.id < a.id


async def test_put_of_nothing_is_nothing(store: Store) -> None:
    assert await store.put_timers([], "error", NOW) == []


async def test_update_changes_a_pending_key(store: Store) -> None:
    (first,) = await store.put_timers([new_timer("a", payload={"v": 1})], "update", NOW)
    (again,) = await store.put_timers(
        [new_timer("a", LATER, payload={"v": 2}, type="other", subject="s")], "update", LATER
    )
    assert again.action == "updated"
    timer = again.timer
    assert timer.id == first.timer.id
    assert (timer.payload, timer.type, timer.subject) == ({"v": 2}, "other", "s")
    assert timer.due_at == timer.run_at == LATER
    assert timer.registered_at == NOW
    assert timer.updated_at == LATER
    assert await store.get_timer("ns", "a") == timer


def _full(key: str, **changes: object) -> NewTimer:
    """A request that sets every column a put stores."""
    fields: dict[str, object] = {
        "payload": {"v": [1, "ü"]},
        "subject": "s",
        "correlation_id": "c",
        "expires_after": timedelta(hours=1, microseconds=7),
        "local": datetime(2025, 3, 1, 21, 0),
        "timezone": "Asia/Tokyo",
        "disambiguation": "later",
        "max_attempts": 9,
        "producer": "api",
    }
    return new_timer(key, LATER, **{**fields, **changes})


async def test_the_same_request_again_is_kept_not_updated(store: Store) -> None:
    (first,) = await store.put_timers([_full("a")], "update", NOW)
    results = await store.put_timers(
        [_full("a"), _full("b"), _full("b", max_attempts=10)], "update", LATER
    )
    assert [r.action for r in results] == ["kept", "created", "updated"]
    assert results[0].timer == first.timer  # no write: updated_at and version as they were
    assert await store.get_timer("ns", "a") == first.timer


@pytest.mark.parametrize(
    "change",
    [
        {"payload": {"v": [1, "u"]}},
        {"subject": None},
        {"correlation_id": "d"},
        {"expires_after": None},
        {"local": None, "timezone": None},
        {"disambiguation": "earlier"},
        {"max_attempts": 8},
        {"producer": "cli"},
        {"type": "other"},
    ],
)
async def test_a_request_that_changes_one_column_is_an_update(
    store: Store, change: dict[str, object]
) -> None:
    await store.put_timers([_full("a")], "update", NOW)
    (again,) = await store.put_timers([_full("a", **change)], "update", LATER)
    assert again.action == "updated"
    assert again.timer.updated_at == LATER


async def test_update_reaches_a_timer_waiting_for_a_retry(store: Store) -> None:
    await store.put_timers([new_timer("a")], "update", NOW)
    await fire(store, "a", Outcome.RETRY, error="boom", run_at=LATER)
    (again,) = await store.put_timers(
        [new_timer("a", payload={"v": 2}, subject="s", producer="api")], "update", NOW
    )
    assert again.action == "updated"
    assert (again.timer.status, again.timer.attempts) == (Status.RETRYING, 1)
    assert again.timer.run_at == NOW
    # The answer is the row as stored: what the retry left (first firing, last error) with
    # what this call changed.
    assert (again.timer.fired_at, again.timer.last_error) == (NOW, "boom")
    assert (again.timer.payload, again.timer.subject, again.timer.producer) == (
        {"v": 2},
        "s",
        "api",
    )
    assert await store.get_timer("ns", "a") == again.timer


async def test_update_keeps_a_fired_key_as_it_is(store: Store) -> None:
    await store.put_timers([new_timer("a", payload={"v": 1})], "update", NOW)
    await fire(store, "a", Outcome.DONE)
    before = await store.get_timer("ns", "a")
    (again,) = await store.put_timers([new_timer("a", payload={"v": 2})], "update", LATER)
    assert again.action == "kept"
    assert again.timer == before
    assert again.timer.payload == {"v": 1}


async def test_keep_never_changes_an_existing_key(store: Store) -> None:
    (first,) = await store.put_timers([new_timer("a", payload={"v": 1})], "keep", NOW)
    results = await store.put_timers(
        [new_timer("a", LATER, payload={"v": 2}), new_timer("b")], "keep", LATER
    )
    assert [r.action for r in results] == ["kept", "created"]
    assert results[0].timer == first.timer


async def test_error_mode_raises_and_stores_nothing_of_the_batch(store: Store) -> None:
    await store.put_timers([new_timer("a", payload={"v": 1})], "error", NOW)
    with pytest.raises(AlreadyExists) as raised:
        await store.put_timers(
            [new_timer("b"), new_timer("a", payload={"v": 2}), new_timer("c")], "error", NOW
        )
    assert raised.value.code == "already_exists"
    assert raised.value.field == "key"
    assert raised.value.message == "a timer with key 'a' already exists"
    assert isinstance(raised.value, Conflict)
    assert await store.get_timer("ns", "b") is None
    assert await store.get_timer("ns", "c") is None
    timer = await store.get_timer("ns", "a")
    assert timer is not None
    assert timer.payload == {"v": 1}


async def test_a_key_twice_in_one_batch_applies_in_order(store: Store) -> None:
    results = await store.put_timers(
        [new_timer("a", payload={"v": 1}), new_timer("a", payload={"v": 2})], "update", NOW
    )
    assert [r.action for r in results] == ["created", "updated"]
    assert [r.timer.payload for r in results] == [{"v": 1}, {"v": 2}]
    kept = await store.put_timers(
        [new_timer("k", payload={"v": 1}), new_timer("k", payload={"v": 2})], "keep", NOW
    )
    assert [r.action for r in kept] == ["created", "kept"]
    assert [r.timer.payload for r in kept] == [{"v": 1}, {"v": 1}]
    with pytest.raises(AlreadyExists):
        await store.put_timers([new_timer("e"), new_timer("e")], "error", NOW)
    assert await store.get_timer("ns", "e") is None


async def test_namespaces_do_not_share_keys(store: Store) -> None:
    one = await store.put_timers([new_timer("a", namespace="one")], "error", NOW)
    two = await store.put_timers([new_timer("a", namespace="two")], "error", NOW)
    assert one[0].timer.id != two[0].timer.id
    assert await store.get_timer("ns", "a") is None
    got = await store.get_timer("two", "a")
    assert got is not None
    assert got.namespace == "two"


async def test_list_filters_and_pages_newest_first(store: Store) -> None:
    timers = [
        new_timer(f"k{i}", subject="u1" if i % 2 else "u2", type="t1" if i < 3 else "t2")
        for i in range(7)
    ]
    await store.put_timers(timers, "error", NOW)
    await store.put_timers([new_timer("elsewhere", namespace="other")], "error", NOW)
    await fire(store, "k0", Outcome.DONE)

    keys: list[list[str]] = []
    cursor: str | None = None
    while True:
        page = await store.list_timers("ns", TimerFilter(), cursor, 3)
        keys.append([t.key for t in page.items])
        cursor = page.next_cursor
        if cursor is None:
            break
    assert keys == [["k6", "k5", "k4"], ["k3", "k2", "k1"], ["k0"]]

    async def listed(timer_filter: TimerFilter) -> list[str]:
        page = await store.list_timers("ns", timer_filter, None, 100)
        assert page.next_cursor is None
        return [t.key for t in page.items]

    assert await listed(TimerFilter(subject="u1")) == ["k5", "k3", "k1"]
    assert await listed(TimerFilter(type="t1")) == ["k2", "k1", "k0"]
    assert await listed(TimerFilter(status=Status.DONE)) == ["k0"]
    assert await listed(TimerFilter(subject="u2", type="t2", status=Status.SCHEDULED)) == [
        "k6",
        "k4",
    ]
    assert await listed(TimerFilter(subject="nobody")) == []
    exact = await store.list_timers("ns", TimerFilter(type="t1"), None, 3)
    assert exact.next_cursor is None
    with pytest.raises(InvalidInput) as raised:
        await store.list_timers("ns", TimerFilter(), "not-a-cursor", 3)
    assert raised.value.field == "cursor"


async def test_cancel_only_while_pending(store: Store) -> None:
    await store.put_timers([new_timer("a"), new_timer("b"), new_timer("r")], "error", NOW)
    cancelled = await store.cancel("ns", "a", LATER)
    assert cancelled.status is Status.CANCELLED
    assert cancelled.completed_at == cancelled.updated_at == LATER
    assert await store.get_timer("ns", "a") == cancelled

    with pytest.raises(NotFound) as missing:
        await store.cancel("ns", "nope", NOW)
    assert (missing.value.code, missing.value.field) == ("not_found", "key")
    assert missing.value.message == "no timer with key 'nope'"

    with pytest.raises(Conflict) as again:
        await store.cancel("ns", "a", NOW)
    assert again.value.message == "timer 'a' is cancelled: only a scheduled timer can be cancelled"
    assert (again.value.code, again.value.field) == ("conflict", "key")

    await store.claim_due("ns", None, NOW, 100, "n1", LATER)
    with pytest.raises(Conflict) as fired:
        await store.cancel("ns", "b", NOW)
    assert fired.value.message == "timer 'b' is running: only a scheduled timer can be cancelled"

    timer = await store.get_timer("ns", "r")
    assert timer is not None
    await store.finish([Finish(timer.id, 1, Outcome.RETRY, "x", LATER)], "n1", NOW)
    assert (await store.cancel("ns", "r", NOW)).status is Status.CANCELLED


async def test_replay_gives_a_dead_timer_new_attempts(store: Store) -> None:
    await store.put_timers([new_timer("a", max_attempts=2), new_timer("b")], "error", NOW)
    await fire(store, "a", Outcome.DEAD, error="gave up")
    dead = await store.get_timer("ns", "a")
    assert dead is not None
    assert dead.status is Status.DEAD
    assert dead.completed_at == NOW

    heard: list[datetime | None] = []
    store.add_wakeup_listener(heard.append)
    replayed = await store.replay("ns", "a", LATER)
    assert replayed.status is Status.SCHEDULED
    assert replayed.run_at == replayed.updated_at == LATER
    assert replayed.completed_at is None
    assert replayed.last_error == "gave up"
    assert replayed.max_attempts - replayed.attempts == 2  # a fresh set of attempts
    assert LATER in heard

    with pytest.raises(Conflict) as conflict:
        await store.replay("ns", "b", NOW)
    assert conflict.value.message == "timer 'b' is scheduled: only a dead timer can be replayed"
    with pytest.raises(NotFound):
        await store.replay("ns", "nope", NOW)

    claimed = await store.claim_due("ns", None, LATER, 10, "n2", LATER)
    assert [c.timer.key for c in claimed] == ["b", "a"]
    again = claimed[1]
    assert again.attempt == replayed.attempts + 1
    history = await store.list_attempts(again.timer.id)
    assert [(a.number, a.outcome) for a in history] == [
        (1, Outcome.DEAD),
        (again.attempt, None),
    ]


async def test_count_by_status_counts_every_status(store: Store) -> None:
    await store.put_timers([new_timer(k) for k in "abcde"], "error", NOW)
    await store.put_timers([new_timer("x", namespace="other")], "error", NOW)
    await store.cancel("ns", "e", NOW)
    await fire(store, "a", Outcome.DONE)
    await fire(store, "b", Outcome.DEAD, error="no")
    counts = await store.count_by_status("ns")
    assert set(counts) == set(Status)
    assert counts == {
        Status.SCHEDULED: 2,
        Status.RUNNING: 0,
        Status.RETRYING: 0,
        Status.DONE: 1,
        Status.DEAD: 1,
        Status.CANCELLED: 1,
        Status.EXPIRED: 0,
    }
    assert sum((await store.count_by_status("empty")).values()) == 0


async def test_namespaces(store: Store) -> None:
    assert not await store.namespace_exists("b")
    await store.ensure_namespace("b", NOW)
    await store.ensure_namespace("a", NOW)
    await store.ensure_namespace("b", LATER)
    assert await store.namespace_exists("b")
    assert await store.list_namespaces() == ["a", "b"]


async def test_migrate_is_idempotent(store: Store) -> None:
    version = await store.schema_version()
    assert version >= 1
    assert await store.migrate() == []
    assert await store.schema_version() == version


async def test_repeated_keys_among_others_keep_input_order(store: Store) -> None:
    batch = [new_timer(k, payload={"n": n}) for n, k in enumerate("abacb")]
    results = await store.put_timers(batch, "update", NOW)
    actions = [(r.action, r.timer.key, r.timer.payload) for r in results]
    assert actions == [
        ("created", "a", {"n": 0}),
        ("created", "b", {"n": 1}),
        ("updated", "a", {"n": 2}),
        ("created", "c", {"n": 3}),
        ("updated", "b", {"n": 4}),
    ]
    ids = {r.timer.key: r.timer.id for r in results}
    assert ids["a"] < ids["b"] < ids["c"]  # first occurrences, in input order
    assert [t.key for t in (await store.list_timers("ns", TimerFilter(), None, 10)).items] == [
        "c",
        "b",
        "a",
    ]


async def test_a_large_lazy_batch_keeps_input_order_and_repeats(store: Store) -> None:
    # More timers than one statement takes, read from a generator; the second half writes
    # the first half's keys again (backwards), so repeats cross the store's chunks.
    keys = [f"k{n:03}" for n in range(200)] + [f"k{n:03}" for n in reversed(range(0, 200, 2))]

    def batch() -> Iterator[NewTimer]:
        for n, key in enumerate(keys):
            yield new_timer(key, payload={"n": n})

    results = await store.put_timers(batch(), "update", NOW)
    assert [(r.action, r.timer.key) for r in results] == [
        ("created" if n < 200 else "updated", key) for n, key in enumerate(keys)
    ]
    assert [r.timer.payload for r in results] == [{"n": n} for n in range(len(keys))]
    ids = [r.timer.id for r in results[:200]]
    assert ids == sorted(ids)
    assert [r.timer.id for r in results[200:]] == [ids[n] for n in reversed(range(0, 200, 2))]
    for result in results[200:]:  # the last write of each key is what is stored
        assert await store.get_timer("ns", result.timer.key) == result.timer
    assert await store.get_timer("ns", "k001") == results[1].timer


async def test_a_lazy_batch_that_fails_midway_stores_nothing(store: Store) -> None:
    def batch() -> Iterator[NewTimer]:
        for n in range(250):
            yield new_timer(f"k{n}")
        raise InvalidInput("[250].timezone", "is not a known time zone")

    with pytest.raises(InvalidInput) as raised:
        await store.put_timers(batch(), "update", NOW)
    assert raised.value.field == "[250].timezone"
    assert sum((await store.count_by_status("ns")).values()) == 0
    assert await store.get_timer("ns", "k0") is None


@pytest.mark.parametrize("on_conflict", ["update", "keep", "error"])
async def test_a_key_not_given_is_generated_by_the_store(
    store: Store, on_conflict: OnConflict
) -> None:
    """Keys the store generates are new: each timer without one is created under a key of its
    own — unlike every stored key and every other key of the batch — in input order, among
    timers with keys given and more than a statement's worth of them."""
    stored = [
        r.timer for r in await store.put_timers([new_timer("a"), new_timer("b")], "error", NOW)
    ]
    keyless = [new_timer(None, type="t", payload={"n": n}) for n in range(230)]
    batch = [*keyless[:100], new_timer("c"), *keyless[100:]]
    results = await store.put_timers(batch, on_conflict, NOW)
    assert [r.action for r in results] == ["created"] * len(batch)
    generated = [r.timer.key for n, r in enumerate(results) if n != 100]
    assert all(re.fullmatch(r"[0-9a-f]{32}", key) for key in generated)
    assert len(set(generated)) == len(generated)
    assert not set(generated) & {"a", "b", "c"}
    assert [r.timer.payload for n, r in enumerate(results) if n != 100] == [
        {"n": n} for n in range(230)
    ]
    ids = [r.timer.id for r in results]
    assert ids == sorted(ids)
    for result in (results[0], results[101], results[-1]):
        assert await store.get_timer("ns", result.timer.key) == result.timer
    for timer in stored:  # untouched
        assert await store.get_timer("ns", timer.key) == timer


@pytest.mark.parametrize("mixed", [False, True], ids=["generated only", "mixed"])
async def test_a_generated_key_never_takes_a_stored_timers_key(
    store: Store, monkeypatch: pytest.MonkeyPatch, mixed: bool
) -> None:
    """Should the generator ever draw a key a stored timer holds (80 random bits a millisecond:
    forced here), the store draws another: the new timer is created under a key of its own and
    the stored one is neither updated nor handed back as if it were the new one."""
    (held,) = await store.put_timers([new_timer("taken", type="t")], "error", NOW)
    draws = iter(["taken"])

    def drawing() -> str:
        return next(draws, None) or validation.generate_key()

    monkeypatch.setattr(duetime.store.sqlite.writes, "generate_key", drawing)
    monkeypatch.setattr(  # PostgreSQL draws a chunk's keys at once
        duetime.store.postgres.write_pipeline,
        "generate_keys",
        lambda count: [drawing() for _ in range(count)],
    )
    keyless = [new_timer(None, type="t", payload={"n": n}) for n in range(3)]
    batch = [new_timer("given"), *keyless] if mixed else keyless
    results = await store.put_timers(batch, "update", NOW)
    assert [r.action for r in results] == ["created"] * len(batch)
    assert "taken" not in {r.timer.key for r in results}
    assert await store.get_timer("ns", "taken") == held.timer
    assert sum((await store.count_by_status("ns")).values()) == len(batch) + 1


async def test_a_generator_stuck_on_a_stored_key_is_reported_and_stores_nothing(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A generator that kept drawing a held key would be a fault: the batch is refused, as a
    key that exists, with nothing of it stored, rather than drawing forever."""
    (held,) = await store.put_timers([new_timer("taken", type="t")], "error", NOW)
    monkeypatch.setattr(duetime.store.sqlite.writes, "generate_key", lambda: "taken")
    monkeypatch.setattr(
        duetime.store.postgres.write_pipeline, "generate_keys", lambda count: ["taken"] * count
    )
    batch = [new_timer("given"), new_timer(None, type="t")]
    with pytest.raises(AlreadyExists) as raised:
        await store.put_timers(batch, "update", NOW)
    assert raised.value.field == "key"
    assert await store.get_timer("ns", "taken") == held.timer
    assert await store.get_timer("ns", "given") is None
