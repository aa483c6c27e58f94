"""Waiting in tests for what runs elsewhere (another process, a background loop), bounded.

Each helper waits for an event and fails with what it waited for; none asserts how long
anything took. The timeouts are generous: they only matter when the event never comes, and a
busy machine may make it come many times later than on a quiet one. These are the suite's
only polling sleeps: a test says what it waits for, not how long.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


def poll(
    check: Callable[[], T],
    timeout: float,
    what: str,
    every: float = 0.02,
    explain: Callable[[], str] | None = None,
) -> T:
    """Call ``check`` in this thread until it returns something true, and return that; fail
    naming ``what`` after ``timeout`` s (with ``explain()``'s text, when given, to say where
    things stood)."""
    deadline = time.monotonic() + timeout
    while not (value := check()):
        if time.monotonic() > deadline:
            detail = f"\n{explain()}" if explain is not None else ""
            raise AssertionError(f"timed out after {timeout} s waiting for {what}{detail}")
        time.sleep(every)
    return value


def wait_until(
    check: Callable[[], object],
    timeout: float,
    what: str,
    every: float = 0.02,
    explain: Callable[[], str] | None = None,
) -> None:
    """:func:`poll`, for a check whose value does not matter beyond being true."""
    poll(check, timeout, what, every, explain)


async def until(
    check: Callable[[], object | Awaitable[object]],
    within: float,
    what: str,
    every: float = 0.02,
    explain: Callable[[], str] | None = None,
) -> None:
    """On the running event loop, call ``check`` (a plain or an async function) until it
    returns something true, letting the loop run meanwhile; fail naming ``what`` after
    ``within`` s."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return
        if loop.time() > deadline:
            detail = f"\n{explain()}" if explain is not None else ""
            raise AssertionError(f"timed out after {within} s waiting for {what}{detail}")
        await asyncio.sleep(every)


def run(main: Callable[[], Awaitable[None]], within: float = 240) -> None:
    """Run an async test body on a new event loop, failing it after ``within`` seconds: a
    bound for a test that hangs, under pytest's own timeout, not a guess at its length (a
    busy machine makes a test of seconds take a minute)."""

    async def bounded() -> None:
        await asyncio.wait_for(main(), within)

    asyncio.run(bounded())
