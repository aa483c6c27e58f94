"""Sleeps on the event loop's timerfd: never before their deadline, in deadline order, each
loop with its own descriptor, closed with the loop; the loop's own timers where there is none."""

from __future__ import annotations

import asyncio
import gc
import os
import sys
import time
import weakref
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from duetime.support import precise_sleep
from duetime.support.precise_sleep import libc_timerfd, sleep_precisely, stdlib_timerfd

LOOPS: list[Callable[[], asyncio.AbstractEventLoop]] = [asyncio.new_event_loop]
try:
    import uvloop

    LOOPS.append(uvloop.new_event_loop)
except ImportError:  # not on this platform: the standard loop alone
    pass

needs_timerfd = pytest.mark.skipif(
    precise_sleep.TIMERFD is None, reason="no timerfd on this system (Linux only)"
)
each_loop = pytest.mark.parametrize("make", LOOPS, ids=lambda make: make.__module__)


def run(make: Callable[[], asyncio.AbstractEventLoop], coro: Coroutine[Any, Any, Any]) -> Any:
    loop = make()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


async def overshoots(delays: list[float]) -> list[float]:
    """Each sleep's end less its deadline (seconds), the sleeps made one after another."""
    found = []
    for delay in delays:
        deadline = time.monotonic() + delay
        await sleep_precisely(delay)
        found.append(time.monotonic() - deadline)
    return found


@needs_timerfd
@each_loop
def test_a_sleep_never_ends_before_its_deadline(
    make: Callable[[], asyncio.AbstractEventLoop],
) -> None:
    delays = [0.0, 1e-6, 5e-5, 0.0002, 0.0004, 0.0006, 0.0011, 0.003] * 3
    assert min(run(make, overshoots(delays))) >= 0


@needs_timerfd
@each_loop
def test_sleeps_made_together_end_in_deadline_order_whatever_order_they_were_made(
    make: Callable[[], asyncio.AbstractEventLoop],
) -> None:
    async def together() -> list[float]:
        ended: list[float] = []
        sleeper = precise_sleep._sleeper(asyncio.get_running_loop())
        assert sleeper is not None
        base = time.monotonic()
        delays = [0.008, 0.002, 0.005, 0.0005, 0.003, 0.001]  # a shorter one re-arms the timer

        async def one(delay: float) -> None:
            await sleeper.sleep_until(base + delay)
            assert time.monotonic() >= base + delay
            ended.append(delay)

        await asyncio.gather(*(one(delay) for delay in delays))
        return ended

    assert run(make, together()) == [0.0005, 0.001, 0.002, 0.003, 0.005, 0.008]


@needs_timerfd
@each_loop
def test_a_cancelled_sleep_leaves_the_others_and_later_ones_alone(
    make: Callable[[], asyncio.AbstractEventLoop],
) -> None:
    async def cancelling() -> list[float]:
        later_deadline = time.monotonic() + 0.004
        first = asyncio.ensure_future(sleep_precisely(0.001))  # the timer is armed for this one
        later = asyncio.ensure_future(sleep_precisely(0.004))
        await asyncio.sleep(0)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        await later
        assert time.monotonic() >= later_deadline  # not ended at the cancelled one's deadline
        return await overshoots([0.001, 0.0003])

    assert min(run(make, cancelling())) >= 0


@needs_timerfd
@each_loop
def test_each_loop_has_its_own_descriptor_closed_once_the_loop_is_gone(
    make: Callable[[], asyncio.AbstractEventLoop],
) -> None:
    loop = make()
    loop.run_until_complete(sleep_precisely(0.0001))
    sleeper = precise_sleep._sleepers[loop]
    assert sleeper is not None
    fd = sleeper._fd
    os.fstat(fd)  # open while the loop lives
    gone = weakref.ref(loop)
    loop.close()
    del loop, sleeper
    gc.collect()
    assert gone() is None
    with pytest.raises(OSError, match="Bad file descriptor"):
        os.fstat(fd)


def test_without_a_timerfd_the_loops_own_timers_serve(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(precise_sleep, "TIMERFD", None)
    for make in LOOPS:
        loop = make()
        try:
            assert min(loop.run_until_complete(overshoots([0.0002, 0.002]))) >= 0
            assert precise_sleep._sleepers[loop] is None  # asked once, remembered
        finally:
            loop.close()


def test_a_loop_that_cannot_watch_a_descriptor_falls_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(*args: object) -> None:
        raise NotImplementedError("no add_reader on this loop")

    loop = asyncio.new_event_loop()
    monkeypatch.setattr(loop, "add_reader", refuse)
    try:
        assert min(loop.run_until_complete(overshoots([0.001]))) >= 0
        assert precise_sleep._sleepers[loop] is None
    finally:
        loop.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="timerfd is Linux's")
def test_both_ways_to_a_timerfd_make_one_that_fires() -> None:
    ways = [way for way in (stdlib_timerfd(), libc_timerfd()) if way is not None]
    assert ways  # libc's at least, on every Python duetime supports
    if sys.version_info >= (3, 13):
        assert len(ways) == 2
    for create, arm in ways:
        fd = create()
        try:
            started = time.monotonic()
            arm(fd, 2_000_000)  # 2 ms from now
            os.set_blocking(fd, True)
            expirations = int.from_bytes(os.read(fd, 8), sys.byteorder)
            assert expirations == 1
            assert time.monotonic() - started >= 0.002
        finally:
            os.close(fd)


@needs_timerfd
@each_loop
def test_a_timer_the_kernel_refuses_to_arm_hands_its_sleeps_to_the_loops_timers(
    make: Callable[[], asyncio.AbstractEventLoop], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert precise_sleep.TIMERFD is not None
    create, arm = precise_sleep.TIMERFD
    armed = 0

    def arm_twice(fd: int, ns: int) -> None:
        nonlocal armed
        armed += 1
        if armed > 2:
            raise OSError(22, "Invalid argument")
        arm(fd, ns)

    monkeypatch.setattr(precise_sleep, "TIMERFD", (create, arm_twice))

    async def sleeps() -> list[float]:
        waiting = [asyncio.ensure_future(overshoots([delay])) for delay in (0.003, 0.001, 0.002)]
        found = [ends[0] for ends in await asyncio.gather(*waiting)]
        found += await overshoots([0.0005, 0.001])  # armed a third time by now, at the latest
        sleeper = precise_sleep._sleepers[asyncio.get_running_loop()]
        assert sleeper is not None
        assert sleeper.broken  # the loop's timers serve from here on
        return found + await overshoots([0.0005])

    assert min(run(make, sleeps())) >= 0
