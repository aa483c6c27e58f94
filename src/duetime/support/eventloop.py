"""Which asyncio event loop duetime's own processes run on.

uvloop runs the same asyncio code on libuv, with less CPU for each callback, task step and
socket read. A worker's time goes mostly to exactly that (a claim, a task per handler, a
write of outcomes), so on uvloop it needs less CPU a job.
The commands that own their process (``duetime worker``, ``serve``, ``tick`` and the rest)
and the sync :class:`~duetime.App`'s background thread use it when it is installed;
``DUETIME_EVENT_LOOP=asyncio`` keeps the standard loop. An :class:`~duetime.AsyncApp` runs on
whatever loop its caller runs.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import sys
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar

from duetime.errors import InvalidInput
from duetime.support import stdio

T = TypeVar("T")

ENV = "DUETIME_EVENT_LOOP"
CHOICES = ("auto", "asyncio", "uvloop")
"""``auto``: uvloop when it can be imported, else asyncio's own loop."""


def loop_factory(env: Mapping[str, str] | None = None) -> Callable[[], asyncio.AbstractEventLoop]:
    """The constructor of the loop that ``DUETIME_EVENT_LOOP`` (default ``auto``) asks for."""
    env = os.environ if env is None else env
    choice = (env.get(ENV) or "auto").strip().lower()
    if choice not in CHOICES:
        raise InvalidInput(ENV, f"must be one of {', '.join(CHOICES)} (got {choice!r})")
    if choice == "asyncio":
        return asyncio.new_event_loop
    try:
        import uvloop
    except ImportError:
        if choice == "uvloop":
            raise InvalidInput(
                ENV, "uvloop is not installed here (pip install uvloop, or choose asyncio)"
            ) from None
        return asyncio.new_event_loop
    return uvloop.new_event_loop


def chosen(env: Mapping[str, str] | None = None) -> str:
    """``uvloop`` or ``asyncio``: the loop :func:`run` would use, for a start-up log line."""
    return "asyncio" if loop_factory(env) is asyncio.new_event_loop else "uvloop"


def run(main: Coroutine[Any, Any, T], *, env: Mapping[str, str] | None = None) -> T:
    """``asyncio.run(main)`` on the chosen loop; stdin, stdout and stderr are left blocking or
    not as they were before it (uvloop leaves a standard stream it watched non-blocking, and
    what is written to one afterwards could then be cut short)."""
    try:
        factory = loop_factory(env)
    except BaseException:
        main.close()  # never awaited: say so quietly instead of warning
        raise
    with stdio.modes_kept(), asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)


def start_task(
    loop: asyncio.AbstractEventLoop,
    coro: Coroutine[Any, Any, T],
    context: contextvars.Context | None = None,
) -> asyncio.Task[T]:
    """A task for ``coro`` that, on Python 3.12 and newer, runs its first step right away.

    Most handlers finish without suspending (a no-op, a quick computation, a cached answer): the
    task is then done when this returns, and the caller records the outcome at once instead of
    scheduling the step and the done callback through the loop, two turns of it a job. The
    first step runs as the task itself, so
    ``asyncio.current_task()``, ``asyncio.timeout()`` and task groups inside it see the handler's
    task. Python 3.11 has no such start, and a loop with its own task factory keeps it: both get
    an ordinary task, started by the loop.
    ``context``: the task runs in it (a traced attempt's, where its span is current) instead of
    a copy of the caller's.
    """
    if sys.version_info >= (3, 12) and loop.get_task_factory() is None:
        return asyncio.Task(coro, loop=loop, eager_start=True, context=context)
    return loop.create_task(coro, context=context)


def on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether this code runs on ``loop`` (not on another thread, e.g. a handler's)."""
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
