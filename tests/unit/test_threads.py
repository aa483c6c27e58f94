"""The daemon threads sync handlers run in: results, errors, context, and a blocked call."""

from __future__ import annotations

import asyncio
import contextvars
import threading

import pytest

from duetime.threads import DaemonThreads

where: contextvars.ContextVar[str] = contextvars.ContextVar("where", default="unset")


async def _test_a_call_returns_its_result_in_a_daemon_thread_with_the_callers_context() -> None:
    threads = DaemonThreads(max_threads=2)
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
    threads = DaemonThreads(max_threads=2)
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


async def _test_threads_are_reused_up_to_the_limit() -> None:
    threads = DaemonThreads(max_threads=3)
    for _ in range(20):
        await threads.run(int, "1")
    assert threads._threads == 1
    gate = threading.Barrier(3, timeout=5)
    await asyncio.gather(*(threads.run(gate.wait) for _ in range(3)))
    assert threads._threads == 3


def test_a_call_returns_its_result_in_a_daemon_thread_with_the_callers_context() -> None:
    asyncio.run(_test_a_call_returns_its_result_in_a_daemon_thread_with_the_callers_context())


def test_an_exception_reaches_the_caller() -> None:
    asyncio.run(_test_an_exception_reaches_the_caller())


def test_a_blocked_call_can_be_left_behind_and_others_still_run() -> None:
    asyncio.run(_test_a_blocked_call_can_be_left_behind_and_others_still_run())


def test_threads_are_reused_up_to_the_limit() -> None:
    asyncio.run(_test_threads_are_reused_up_to_the_limit())
