"""The worker's slot account: who holds a slot, and how many are free, without a store."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from duetime.worker.slots import Slots

CONCURRENCY = 4
BATCH = 3


def account() -> Slots:
    return Slots(CONCURRENCY, BATCH)


def in_a_loop(body: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(body())


async def idle() -> None:
    await asyncio.Event().wait()


def test_every_slot_is_free_at_first() -> None:
    slots = account()
    assert (slots.free(), slots.in_flight, slots.unwritten) == (CONCURRENCY, 0, 0)
    assert not slots.busy
    assert list(slots.held()) == []


def test_a_running_handler_holds_a_slot_until_it_ends() -> None:
    async def body() -> None:
        slots = account()
        task = asyncio.ensure_future(idle())
        slots.running(7, 70, task)
        assert (slots.free(), slots.in_flight, slots.busy) == (CONCURRENCY - 1, 1, True)
        assert list(slots.held()) == [(7, 70)]
        assert not slots.capacity.is_set()
        slots.ended(7)
        assert (slots.free(), slots.in_flight, slots.busy) == (CONCURRENCY, 0, False)
        assert list(slots.held()) == []
        assert slots.capacity.is_set()
        task.cancel()

    in_a_loop(body)


def test_ending_an_attempt_twice_frees_its_slot_once() -> None:
    async def body() -> None:
        slots = account()
        first, second = asyncio.ensure_future(idle()), asyncio.ensure_future(idle())
        slots.running(1, None, first)
        slots.running(2, None, second)
        slots.ended(1)
        slots.ended(1)
        assert (slots.free(), list(slots.held())) == (CONCURRENCY - 1, [(2, None)])
        first.cancel()
        second.cancel()

    in_a_loop(body)


def test_a_fan_out_holds_a_slot_for_each_of_its_rows_with_no_token() -> None:
    async def body() -> None:
        slots = account()
        task = asyncio.ensure_future(idle())
        slots.fanning([1, 2, 3], task)
        assert (slots.free(), slots.in_flight) == (CONCURRENCY - 3, 3)
        assert sorted(slots.held()) == [(1, None), (2, None), (3, None)]
        slots.fanned([1, 2, 3])
        assert (slots.free(), slots.in_flight, slots.busy) == (CONCURRENCY, 0, False)
        assert slots.capacity.is_set()
        task.cancel()

    in_a_loop(body)


def test_outcomes_take_slots_only_past_a_batch_of_them_waiting() -> None:
    slots = account()
    for _ in range(BATCH):
        slots.awaiting()
    assert (slots.free(), slots.unwritten, slots.busy) == (CONCURRENCY, BATCH, True)
    slots.awaiting()
    slots.awaiting()
    assert (slots.free(), slots.unwritten) == (CONCURRENCY - 2, BATCH + 2)
    slots.written(0)  # a write that took none (they wait for the next one) frees nothing
    assert slots.free() == CONCURRENCY - 2
    assert slots.capacity.is_set()
    slots.written(BATCH + 2)
    assert (slots.free(), slots.unwritten, slots.busy) == (CONCURRENCY, 0, False)


def test_running_rows_and_waiting_outcomes_add_up_and_free_may_go_negative() -> None:
    async def body() -> None:
        slots = account()
        tasks = [asyncio.ensure_future(idle()) for _ in range(CONCURRENCY)]
        for timer_id, task in enumerate(tasks):
            slots.running(timer_id, timer_id, task)
        for _ in range(BATCH + 1):
            slots.awaiting()
        assert slots.free() == -1  # the claims wait until it is above zero again
        for task in tasks:
            task.cancel()

    in_a_loop(body)


def test_drain_waits_for_the_rows_running_and_cancels_them_after_the_grace() -> None:
    async def body() -> None:
        slots = account()
        quick = asyncio.ensure_future(asyncio.sleep(0))
        stuck = asyncio.ensure_future(idle())
        slots.running(1, 1, quick)
        slots.fanning([2, 3], stuck)
        await slots.drain(0.01)
        assert quick.done()
        assert not quick.cancelled()
        assert stuck.cancelled()

    in_a_loop(body)


def test_drain_with_nothing_running_returns_at_once() -> None:
    in_a_loop(lambda: account().drain(None))
