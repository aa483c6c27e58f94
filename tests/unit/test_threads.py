"""The daemon threads sync handlers run in: results, errors, context, a blocked call, as many
threads as calls at once, the check made as a call begins, and what escapes a call."""

from __future__ import annotations

import asyncio
import contextvars
import threading

import pytest
from tests.waiting import wait_until

from duetime.support.threads import DaemonThreads, Escaped, NotStarted

where: contextvars.ContextVar[str] = contextvars.ContextVar("where", default="unset")


async def _test_a_call_returns_its_result_in_a_daemon_thread_with_the_callers_context() -> None:
    threads = DaemonThreads()
    where.set("caller")

    def look() -> tuple[str, bool, bool]:
        current = threading.current_thread()
        return where.get(), current.daemon, current is threading.main_thread()

    assert await threads.run(look) == ("caller", True, False)


async def _test_an_exception_reaches_the_caller() -> None:
    def fail(text: str) -> None:
        raise KeyError(text)

    with pytest.raises(KeyError, match="nope"):
        await DaemonThreads().run(fail, "nope")


async def _test_a_blocked_call_can_be_left_behind_and_others_still_run() -> None:
    threads = DaemonThreads()
    release = threading.Event()
    blocked = asyncio.ensure_future(threads.run(release.wait))
    await asyncio.sleep(0)
    blocked.cancel()
    with pytest.raises(asyncio.CancelledError):
        await blocked
    assert await asyncio.gather(*(threads.run(pow, 2, n) for n in range(10))) == [
        2**n for n in range(10)
    ]
    release.set()  # the abandoned call ends; its result is dropped
    assert await threads.run(str, 1) == "1"


async def _test_threads_are_reused_and_as_many_run_as_calls_are_made() -> None:
    threads = DaemonThreads()
    for _ in range(20):
        await threads.run(int, "1")
    assert threads.threads == 1
    count = 40  # far more than cpu + 4: each call waits until all are in
    gate = threading.Barrier(count, timeout=30)
    await asyncio.gather(*(threads.run(gate.wait) for _ in range(count)))
    assert threads.threads == count


async def _test_an_idle_thread_ends() -> None:
    threads = DaemonThreads(idle_seconds=0.05)
    await threads.run(int, "1")
    await asyncio.to_thread(wait_until, lambda: threads.threads == 0, 30, "the idle thread to end")
    assert await threads.run(int, "2") == 2  # a new one starts


async def _test_a_call_begins_only_if_may_start_says_so_in_its_thread() -> None:
    threads = DaemonThreads()
    called: list[int] = []
    asked_in: list[bool] = []

    def may_start() -> bool:
        asked_in.append(threading.current_thread() is threading.main_thread())
        return False

    with pytest.raises(NotStarted):
        await threads.run(called.append, 1, may_start=may_start)
    assert called == []
    assert asked_in == [False]
    assert await threads.run(called.append, 2, may_start=lambda: True) is None
    assert called == [2]


async def _test_what_is_not_an_exception_reaches_the_caller_wrapped(raised: BaseException) -> None:
    def fail() -> None:
        raise raised

    with pytest.raises(Escaped) as caught:
        await DaemonThreads().run(fail)
    assert caught.value.error is raised
    assert asyncio.current_task() is not None  # the caller's task goes on


def test_a_call_returns_its_result_in_a_daemon_thread_with_the_callers_context() -> None:
    asyncio.run(_test_a_call_returns_its_result_in_a_daemon_thread_with_the_callers_context())


def test_an_exception_reaches_the_caller() -> None:
    asyncio.run(_test_an_exception_reaches_the_caller())


def test_a_blocked_call_can_be_left_behind_and_others_still_run() -> None:
    asyncio.run(_test_a_blocked_call_can_be_left_behind_and_others_still_run())


def test_threads_are_reused_and_as_many_run_as_calls_are_made() -> None:
    asyncio.run(_test_threads_are_reused_and_as_many_run_as_calls_are_made())


def test_an_idle_thread_ends() -> None:
    asyncio.run(_test_an_idle_thread_ends())


def test_a_call_begins_only_if_may_start_says_so_in_its_thread() -> None:
    asyncio.run(_test_a_call_begins_only_if_may_start_says_so_in_its_thread())


@pytest.mark.parametrize(
    "raised",
    [SystemExit(3), KeyboardInterrupt(), BaseException("bare"), GeneratorExit(),
     asyncio.CancelledError()],
    ids=lambda e: type(e).__name__,
)  # fmt: skip
def test_what_is_not_an_exception_reaches_the_caller_wrapped(raised: BaseException) -> None:
    asyncio.run(_test_what_is_not_an_exception_reaches_the_caller_wrapped(raised))
