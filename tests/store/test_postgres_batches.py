"""How PostgreSQL scheduling sends a batch: columns the whole batch shares go as one value (or
none), keys the store generates go in without a conflict check, and the rows written come back
right however the answers interleave with the chunks still being sent."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest
from storekit import NOW, StoreFactory, new_timer

from duetime.errors import AlreadyExists, InvalidInput
from duetime.model import NewTimer, Timer
from duetime.requests import TimerRequest
from duetime.store.postgres.write_plan import PUT_CHUNK
from duetime.store.postgres.written_rows import batch_column, check_text


def _fresh(count: int, **fields: Any) -> list[NewTimer]:
    """Timers as schedule/schedule_many hand them to the store: validated, no keys given."""
    return [
        TimerRequest("t", {"n": n}, at=NOW + timedelta(minutes=n), **fields).resolve(
            "ns", NOW, 3, 10_000, producer="p", straight_to_store=True
        )
        for n in range(count)
    ]


def _stored(timer: NewTimer, got: Timer | None) -> tuple[Any, ...]:
    assert got is not None
    return (
        (got.namespace, got.key, got.type, got.payload, got.due_at, got.max_attempts),
        (got.subject, got.correlation_id, got.expires_after, got.local, got.timezone),
        (got.disambiguation, got.producer),
    )


def _sent(timer: NewTimer) -> tuple[Any, ...]:
    return (
        (timer.namespace, timer.key, timer.type, timer.payload, timer.due_at, timer.max_attempts),
        (timer.subject, timer.correlation_id, timer.expires_after, timer.local, timer.timezone),
        (timer.disambiguation, timer.producer),
    )


def test_a_column_goes_whole_as_one_value_or_as_none() -> None:
    assert batch_column(["a", "a", "a"]) == ["a"]
    assert batch_column([None, None]) == []
    assert batch_column(["a", None, "a"]) == ["a", None, "a"]
    assert batch_column(["a", "b"]) == ["a", "b"]
    assert batch_column([None]) == [None]  # one row: as it is
    assert batch_column([]) == []


@pytest.mark.parametrize("on_conflict", ["update", "keep", "error"])
async def test_every_column_is_stored_as_sent_whether_the_batch_shares_it_or_not(
    pg_url: str, open_store: StoreFactory, on_conflict: str
) -> None:
    """One batch per way a column can go: shared by all (one value), NULL for all (none), and
    different (one a row, NULLs among them)."""
    store = await open_store(pg_url)
    local = datetime(2025, 6, 1, 9, 0)
    shared = [
        new_timer(
            f"s{n}",
            type="same",
            subject="sub",
            correlation_id="c",
            expires_after=timedelta(hours=1),
            local=local,
            timezone="Europe/Paris",
            disambiguation="later",
            producer="p",
            max_attempts=7,
        )
        for n in range(5)
    ]
    missing = [new_timer(f"m{n}", type="same") for n in range(5)]
    varied = [
        new_timer(
            f"v{n}",
            namespace="ns" if n % 2 else "other",
            subject=None if n % 3 else f"sub{n}",
            correlation_id=f"c{n}" if n % 2 else None,
            expires_after=timedelta(seconds=n) if n else None,
            local=local + timedelta(hours=n) if n % 2 else None,
            timezone="Asia/Tokyo" if n % 2 else None,
            disambiguation=("earlier", "later", "compatible", "reject", "compatible")[n],
            producer=None if n == 2 else f"p{n}",
            max_attempts=n + 1,
        )
        for n in range(5)
    ]
    for batch in (shared, missing, varied):
        results = await store.put_timers(batch, on_conflict, NOW)  # type: ignore[arg-type]
        assert [r.action for r in results] == ["created"] * len(batch)
        for timer, result in zip(batch, results, strict=True):
            assert _stored(timer, result.timer) == _sent(timer)  # as answered
            got = await store.get_timer(timer.namespace, timer.key)
            assert _stored(timer, got) == _sent(timer)  # as stored


async def test_generated_keys_go_in_unchecked_in_input_order_and_stay_keys(
    pg_url: str, open_store: StoreFactory
) -> None:
    """Many chunks of generated keys: every timer made, ids in input order, each found by its
    key and scheduled again by it (an update: the key is an ordinary key once stored)."""
    store = await open_store(pg_url)
    timers = _fresh(PUT_CHUNK * 10 + 7)
    assert all(t.key is None for t in timers)
    results = await store.put_timers(timers, "update", NOW)
    assert [r.action for r in results] == ["created"] * len(timers)
    keys = [r.timer.key for r in results]
    assert len(set(keys)) == len(keys)
    ids = [r.timer.id for r in results]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    for n in (0, PUT_CHUNK, len(timers) - 1):
        found = await store.get_timer("ns", keys[n])
        assert found is not None
        assert (found.id, found.payload) == (ids[n], {"n": n})
    again = replace(timers[3], key=keys[3], payload={"n": "again"})
    (updated,) = await store.put_timers([again], "update", NOW)
    assert (updated.action, updated.timer.id) == ("updated", ids[3])
    assert updated.timer.payload == {"n": "again"}
    with pytest.raises(AlreadyExists):
        await store.put_timers([again], "error", NOW)


async def test_a_batch_mixing_given_and_generated_keys_is_checked_throughout(
    pg_url: str, open_store: StoreFactory
) -> None:
    store = await open_store(pg_url)
    (first,) = await store.put_timers([new_timer("given", type="t")], "error", NOW)
    fresh = _fresh(3)
    batch = [fresh[0], new_timer("given", type="t", payload={"v": 2}), *fresh[1:]]
    results = await store.put_timers(batch, "update", NOW)
    assert [r.action for r in results] == ["created", "updated", "created", "created"]
    assert results[1].timer.id == first.timer.id
    assert results[1].timer.payload == {"v": 2}


async def test_timers_prepared_for_a_caller_can_be_sent_twice(
    pg_url: str, open_store: StoreFactory
) -> None:
    """A caller who prepared timers (generated keys and all) may resend them after an unclear
    failure: they are checked like any key, so the second send finds the first."""
    store = await open_store(pg_url)
    prepared = [TimerRequest("t", {"n": n}, delay=60).resolve("ns", NOW, 3, 1000) for n in range(3)]
    assert all(t.key is not None for t in prepared)
    first = await store.put_timers(prepared, "update", NOW)
    second = await store.put_timers(prepared, "keep", NOW)
    assert [r.action for r in second] == ["kept"] * 3
    assert [r.timer.id for r in second] == [r.timer.id for r in first]


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ([("subject", "a\x00")], "subject"),
        ([("timezone", "Europe/\x00")], "timezone"),
        ([("subject", "b\x00"), ("namespace", "n\x00s")], "namespace"),  # one timer: field order
    ],
)
def test_a_nul_in_a_text_column_is_named_by_the_first_timer_that_has_one(
    bad: list[tuple[str, str]], field: str
) -> None:
    timers = [new_timer(f"k{n}", subject="s") for n in range(5)]
    timers[2] = replace(timers[2], **dict(bad))
    timers[4] = replace(timers[4], key="late\x00key")  # a later timer's NUL is not the one named
    with pytest.raises(InvalidInput) as raised:
        check_text(timers)
    assert raised.value.field == field
    check_text(timers[:2])  # none: nothing to say
