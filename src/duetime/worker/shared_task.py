"""Attempts of a batch share one task until one of them waits: the worker's shared starts.

A task for each attempt costs the event loop a task object, a step scheduled and run, and on
Python 3.11 a turn of the loop before the handler even begins; yet most handlers finish without
ever waiting (a no-op, a quick computation, a cached answer). Here a batch's attempts begin one
after another in one task, each in a copy of the context as a task of its own would run it.
The first one that waits keeps that task for the rest of its life: its later steps run there
(:func:`drive`), so ``asyncio.current_task()``, a timeout or task group it opened, and a
cancellation at shutdown are its own, as they would be in a task of its own. The attempts after
it go on the same way in a new task. A batch of handlers that never wait costs one task.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import types
from collections.abc import Callable, Coroutine, Generator, Sequence
from typing import Any, TypeVar

log = logging.getLogger("duetime.worker")

T = TypeVar("T")
Begin = Callable[[T], Coroutine[Any, Any, None]]
"""Makes the coroutine of one item's attempt (not started)."""
Moved = Callable[[Sequence[T], "asyncio.Task[None]"], None]
"""Told which task now runs the items not begun yet (the slot account keeps it per row)."""


def start_shared(
    loop: asyncio.AbstractEventLoop, items: Sequence[T], begin: Begin[T], moved: Moved[T]
) -> asyncio.Task[None]:
    """A task beginning ``items``' attempts in turn (see the module's text); ``moved`` hears of
    every task the items not begun yet move to, this first one included."""
    task = loop.create_task(_run(loop, items, begin, moved))
    moved(items, task)
    return task


async def _run(
    loop: asyncio.AbstractEventLoop, items: Sequence[T], begin: Begin[T], moved: Moved[T]
) -> None:
    task = asyncio.current_task()
    for i, item in enumerate(items):
        context = contextvars.copy_context()
        coro = begin(item)
        try:
            waits_on = context.run(coro.send, None)
        except StopIteration:
            # Done without waiting: nearly every attempt. A cancellation it asked of its task
            # (current_task().cancel(), then returned) must not reach the next: they move on.
            if task is not None and task.cancelling():
                _move_on(loop, items[i + 1 :], begin, moved)
                return
            continue
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException:  # an attempt handles its own errors: this is a fault of ours
            log.exception("an attempt ended with an error of the worker's own")
            continue
        _move_on(loop, items[i + 1 :], begin, moved)
        await drive(coro, context, waits_on)
        return


def _move_on(
    loop: asyncio.AbstractEventLoop, rest: Sequence[T], begin: Begin[T], moved: Moved[T]
) -> None:
    """The attempts not begun yet go on in a task of their own."""
    if rest:
        moved(rest, loop.create_task(_run(loop, rest, begin, moved)))


@types.coroutine
def drive(
    coro: Coroutine[Any, Any, None], context: contextvars.Context, waits_on: Any
) -> Generator[Any, Any, None]:
    """The rest of a started ``coro``, in ``context``, in the task that awaits this: what it
    waits on is handed to that task, and what the task is sent or thrown (a cancellation) is
    passed on to it."""
    send, throw = coro.send, coro.throw
    while True:
        try:
            value = yield waits_on
        except BaseException as exc:
            try:
                waits_on = context.run(throw, exc)
            except StopIteration:
                return
        else:
            try:
                waits_on = context.run(send, value)
            except StopIteration:
                return
