"""CPU-bound work a request asks for (expanding a recurrence rule), run one at a time per loop.

Running such work in a thread keeps the event loop free only in part: the thread holds the
interpreter's lock while it computes, and the loop thread gets it back at the next switch
interval. With one thread computing, the loop waits a few milliseconds each time it needs the
lock; with as many threads as a tenant sends requests, it waits behind each of them in turn,
and every other tenant's request waits with it. So the expansions of one event loop run one
after another: the others wait (asynchronously, holding nothing) for their turn, and the loop
never competes with more than one of them. And a process that runs such work asks the
interpreter to hand its lock over every :data:`SWITCH_INTERVAL` rather than every 5 ms, so the
loop thread waits that long at most each time it needs it.
"""

from __future__ import annotations

import asyncio
import sys
import weakref
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

SWITCH_INTERVAL = 0.0005
"""Seconds a thread may hold the interpreter's lock while another waits for it."""

_turns: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
    weakref.WeakKeyDictionary()
)


def _turn() -> asyncio.Semaphore:
    loop = asyncio.get_running_loop()
    turn = _turns.get(loop)
    if turn is None:
        turn = _turns[loop] = asyncio.Semaphore(1)
    return turn


async def run_cpu_work(func: Callable[[], T]) -> T:
    """``func()`` in a thread, once the loop's other CPU work of this kind has finished."""
    async with _turn():
        if sys.getswitchinterval() > SWITCH_INTERVAL:
            sys.setswitchinterval(SWITCH_INTERVAL)
        return await asyncio.to_thread(func)
