"""The threads sync handlers run in: daemon threads, so a process can exit past one that blocks.

``asyncio.to_thread`` runs work on the loop's default executor, whose threads the interpreter
joins at exit: a sync handler blocked in a call that never returns held a stopping worker long
after ``shutdown_grace`` had cancelled its attempt (which is already recorded to run again).
These threads are daemons: once the worker has stopped, the process exits whatever they do.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

MAX_THREADS = min(32, (os.cpu_count() or 1) + 4)
"""As many as asyncio's default executor: threads are started as work needs them, up to this."""

_Work = tuple[
    asyncio.AbstractEventLoop, "asyncio.Future[Any]", contextvars.Context, Callable[[], Any]
]


class DaemonThreads:
    """A pool of daemon threads running calls for event loops (any loop, any thread)."""

    def __init__(self, max_threads: int = MAX_THREADS) -> None:
        self.max_threads = max_threads
        self._work: queue.SimpleQueue[_Work] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0

    async def run(self, func: Callable[..., T], *args: Any) -> T:
        """``func(*args)`` in a thread, in a copy of the caller's context (as ``to_thread``).

        Cancelling the caller does not stop the call (no thread can be stopped): the caller
        moves on, and the thread's result is dropped."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        context = contextvars.copy_context()
        self._work.put((loop, future, context, lambda: func(*args)))
        self._grow()
        return await future

    def _grow(self) -> None:
        """A thread for the work just queued: an idle one, else a new one (up to the limit)."""
        with self._lock:
            if self._idle:
                self._idle -= 1
                return
            if self._threads >= self.max_threads:
                return
            self._threads += 1
        threading.Thread(target=self._serve, name="duetime-handler", daemon=True).start()

    def _serve(self) -> None:
        while True:
            loop, future, context, call = self._work.get()
            result: Any = None
            error: BaseException | None = None
            try:
                result = context.run(call)
            except BaseException as exc:  # handed to the awaiting task, as to_thread does
                error = exc
            with self._lock:  # idle before the caller hears back (and may queue more)
                self._idle += 1
            _settle(loop, future, result, error)


def _settle(
    loop: asyncio.AbstractEventLoop,
    future: asyncio.Future[Any],
    result: Any,
    error: BaseException | None,
) -> None:
    def settle() -> None:
        if future.done():  # the caller was cancelled meanwhile
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody is waiting
        loop.call_soon_threadsafe(settle)


HANDLER_THREADS = DaemonThreads()
"""The pool every sync handler runs in."""
