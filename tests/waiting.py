"""Waiting in tests for what runs elsewhere (another process, a background loop), bounded.

Each helper polls and fails with what it waited for; none asserts how long anything took.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable


def wait_until(
    check: Callable[[], bool],
    timeout: float,
    what: str,
    every: float = 0.02,
    explain: Callable[[], str] | None = None,
) -> None:
    """Poll ``check`` in this thread until it holds; fail naming ``what`` after ``timeout`` s
    (with ``explain()``'s text, when given, to say where things stood)."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            detail = f"\n{explain()}" if explain is not None else ""
            raise AssertionError(f"timed out after {timeout} s waiting for {what}{detail}")
        time.sleep(every)


def run(main: Callable[[], Awaitable[None]], within: float = 60) -> None:
    """Run an async test body on a new event loop, failing it after ``within`` seconds."""

    async def bounded() -> None:
        await asyncio.wait_for(main(), within)

    asyncio.run(bounded())
