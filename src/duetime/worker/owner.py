"""Which thread may touch a worker's state: the thread of its event loop, and no other.

A worker's parts (the slots, the starter's queue, the completer's outcomes, the counters)
are plain objects read and written without locks, which is sound only while every touch
happens on the worker's event loop. Sync handlers run in threads: whatever they produce (the
instant one began, its result) travels back through ``loop.call_soon_threadsafe`` and is
applied on the loop. :meth:`LoopOwner.check` says so where state is written; it costs one
global read unless checking is on (``DUETIME_CHECK_LOOP_OWNER=1``, which the test suite sets),
and then a write from another thread raises :class:`OffLoop` (and is kept in
:data:`VIOLATIONS`, so a test sees one that was swallowed where it was raised).
"""

from __future__ import annotations

import asyncio
import os
import threading

CHECKING = os.environ.get("DUETIME_CHECK_LOOP_OWNER", "") == "1"
"""Whether :meth:`LoopOwner.check` checks (off in production: the hot path pays nothing)."""

VIOLATIONS: list[str] = []
"""What was touched from a thread other than its loop's, while checking was on."""


class OffLoop(AssertionError):
    """A worker's loop-owned state was touched from another thread."""


class LoopOwner:
    """The event loop a worker's state belongs to, bound when the worker starts."""

    __slots__ = ("loop",)

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def check(self, what: str) -> None:
        """Raise :class:`OffLoop` when checking is on and this is not the bound loop's thread."""
        if not CHECKING or self.loop is None:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not self.loop:
            thread = threading.current_thread().name
            VIOLATIONS.append(f"{what} from thread {thread}")
            raise OffLoop(f"{what} touched off its event loop, from thread {thread}")
