"""Attempts sharing a task until one waits (duetime.worker.shared_task): what a task of its own
would promise each attempt still holds — its own task across its steps, its own context, its
own cancellation — and the attempts after one that waits are not held up by it."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

import pytest

from duetime.worker.shared_task import start_shared


def on_a_loop(body: Callable[[], Coroutine[Any, Any, None]]) -> Callable[[], None]:
    """The test, run on an event loop of its own."""

    def test() -> None:
        asyncio.run(body())

    test.__name__ = body.__name__
    return test


seen: contextvars.ContextVar[str | None] = contextvars.ContextVar("seen", default=None)


class Tasks:
    """The ``moved`` callback: which task each item was last said to run in."""

    def __init__(self) -> None:
        self.of: dict[int, asyncio.Task[None]] = {}
        self.made: set[asyncio.Task[None]] = set()

    def __call__(self, items: Sequence[int], task: asyncio.Task[None]) -> None:
        self.made.add(task)
        for item in items:
            self.of[item] = task


@on_a_loop
async def test_attempts_that_never_wait_share_one_task() -> None:
    ran: list[tuple[int, asyncio.Task[None] | None]] = []

    async def attempt(item: int) -> None:
        ran.append((item, asyncio.current_task()))

    tasks = Tasks()
    task = start_shared(asyncio.get_running_loop(), [1, 2, 3], attempt, tasks)
    await task
    assert [item for item, _ in ran] == [1, 2, 3]
    assert {t for _, t in ran} == {task} == tasks.made


@on_a_loop
async def test_an_attempt_that_waits_keeps_its_task_and_the_rest_go_on() -> None:
    gate, others_done = asyncio.Event(), asyncio.Event()
    steps: dict[int, list[asyncio.Task[None] | None]] = {}
    finished: list[int] = []

    async def attempt(item: int) -> None:
        steps.setdefault(item, []).append(asyncio.current_task())
        if item == 2:
            await gate.wait()
            steps[item].append(asyncio.current_task())
        finished.append(item)
        if finished == [1, 3, 4]:
            others_done.set()

    tasks = Tasks()
    first = start_shared(asyncio.get_running_loop(), [1, 2, 3, 4], attempt, tasks)
    await others_done.wait()  # 3 and 4 do not wait for 2
    gate.set()
    await first
    assert finished == [1, 3, 4, 2]
    assert steps[2] == [first, first]  # both of its steps in one task, the one it began in
    assert steps[3][0] is steps[4][0] is not first
    assert tasks.of[3] is tasks.of[4] is steps[3][0]


@on_a_loop
async def test_each_attempt_runs_in_its_own_context() -> None:
    read: list[str | None] = []

    async def attempt(item: int) -> None:
        read.append(seen.get())
        seen.set(f"set by {item}")
        if item == 1:
            await asyncio.sleep(0)
            read.append(seen.get())

    tasks = Tasks()
    await start_shared(asyncio.get_running_loop(), [1, 2, 3], attempt, tasks)
    await tasks.of[3]
    # 1 waited, 2 and 3 began in a task of their own meanwhile: each read only its own set
    assert read == [None, None, None, "set by 1"]
    assert seen.get() is None


@on_a_loop
async def test_a_timeout_opened_before_waiting_cancels_only_its_attempt() -> None:
    outcome: dict[int, str] = {}
    gate = asyncio.Event()

    async def attempt(item: int) -> None:
        if item == 1:
            try:
                async with asyncio.timeout(0.01):
                    await gate.wait()
            except TimeoutError:
                outcome[item] = "timed out"
            return
        await gate.wait()
        outcome[item] = "done"

    tasks = Tasks()
    first = start_shared(asyncio.get_running_loop(), [1, 2], attempt, tasks)
    await first
    assert outcome == {1: "timed out"}
    gate.set()
    await tasks.of[2]
    assert outcome == {1: "timed out", 2: "done"}


@on_a_loop
async def test_cancelling_the_task_of_a_waiting_attempt_reaches_that_attempt() -> None:
    got: list[str] = []
    waiting = {1: asyncio.Event(), 2: asyncio.Event()}

    async def attempt(item: int) -> None:
        waiting[item].set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            got.append(f"{item} cancelled")
            raise

    tasks = Tasks()
    start_shared(asyncio.get_running_loop(), [1, 2], attempt, tasks)
    await waiting[1].wait()
    await waiting[2].wait()
    tasks.of[1].cancel()
    with pytest.raises(asyncio.CancelledError):
        await tasks.of[1]
    assert got == ["1 cancelled"]
    assert not tasks.of[2].done()
    tasks.of[2].cancel()
    await asyncio.wait([tasks.of[2]])
    assert got == ["1 cancelled", "2 cancelled"]


@on_a_loop
async def test_a_cancellation_an_attempt_asks_of_its_task_stays_with_it() -> None:
    ran: list[int] = []

    async def attempt(item: int) -> None:
        if item == 1:
            task = asyncio.current_task()
            assert task is not None
            task.cancel()  # and returns without waiting: nothing of the next attempt's
            return
        await asyncio.sleep(0)
        ran.append(item)

    tasks = Tasks()
    start_shared(asyncio.get_running_loop(), [1, 2, 3], attempt, tasks)
    await asyncio.wait([tasks.of[2]])
    await asyncio.wait([tasks.of[3]])
    assert ran == [2, 3]
