"""AsyncApp.schedule_many on each backend: all of a batch or, on bad input, none of it, with
the bad request named by its index — wherever in a long batch it is."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from duetime import AsyncApp, FrozenClock, InvalidInput, TimerRequest
from duetime.store import Store

START = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def requests(n: int, bad_at: int | None = None) -> list[TimerRequest]:
    return [
        TimerRequest(
            "t",
            {"n": i},
            local="2025-03-02T09:00",
            timezone="Mars/Olympus" if i == bad_at else "Europe/Paris",
            key=f"k{i}",
        )
        for i in range(n)
    ]


async def test_a_bad_request_deep_in_a_batch_is_named_and_nothing_is_stored(store: Store) -> None:
    app = AsyncApp(store.url, "ns", store=store, clock=FrozenClock(START))
    with pytest.raises(InvalidInput) as raised:  # before the app is open: nothing made at all
        await app.timers.schedule_many(requests(300, 250))
    assert raised.value.field == "[250].timezone"
    assert not await store.namespace_exists("ns")
    await app.open()  # from now on the batch is validated as the store reads it
    for bad_at in (0, 99, 100, 250, 299):
        with pytest.raises(InvalidInput) as raised:
            await app.timers.schedule_many(requests(300, bad_at))
        assert raised.value.field == f"[{bad_at}].timezone"
        assert sum((await store.count_by_status("ns")).values()) == 0
    with pytest.raises(InvalidInput) as raised:  # the only request: its field alone
        await app.timers.schedule_many(requests(1, 0))
    assert raised.value.field == "timezone"


async def test_a_long_batch_is_stored_whole_in_order(store: Store) -> None:
    app = AsyncApp(store.url, "ns", store=store, clock=FrozenClock(START))
    results = await app.timers.schedule_many(iter(requests(300)))  # any iterable, read once
    assert [r.timer.key for r in results] == [f"k{i}" for i in range(300)]
    assert all(r.action == "created" for r in results)
    assert results[7].timer.due_at == datetime(2025, 3, 2, 8, 0, tzinfo=UTC)
    assert results[7].timer.registered_at == START
    assert await app.get("k299") == results[299].timer
