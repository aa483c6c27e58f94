"""The threads sync handlers run in: daemon threads, as many as the calls running at once.

``asyncio.to_thread`` runs work on the loop's default executor, whose threads the interpreter
joins at exit: a sync handler blocked in a call that never returns held a stopping worker long
after ``shutdown_grace`` had cancelled its attempt (which is already recorded to run again).
These threads are daemons: once the worker has stopped, the process exits whatever they do.

The pool has no size of its own: a call finds an idle thread or starts one, so what bounds the
sync handlers running at once is the worker's ``concurrency``, as for async ones. (A pool of
``cpu + 4`` threads ran 6 of 20 one-second handlers at once on a 2-core machine while the worker
counted 20 slots, and rows waiting for a thread were started after their lease had run out.)
A thread idle for :data:`IDLE_SECONDS` ends.

What a call raises reaches its caller as an :class:`Exception`: a ``SystemExit`` or
``KeyboardInterrupt`` raised in the awaiting task would stop its event loop, and a
``CancelledError`` would read as the task's own cancellation; a handler's is neither.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

IDLE_SECONDS = 60.0
"""A thread with nothing to run for this long ends (a busy worker keeps its threads)."""

_Work = tuple[
    asyncio.AbstractEventLoop,
    "asyncio.Future[Any]",
    contextvars.Context,
    Callable[[], Any],
    Callable[[], bool] | None,
]


class Escaped(Exception):
    """A call in a thread raised ``error``, a BaseException that is not an Exception
    (``SystemExit``, ``KeyboardInterrupt``, ``GeneratorExit``, a ``CancelledError``, a bare
    ``BaseException``): carried to the caller as an Exception, the call's failure."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(type(error).__name__)
        self.error = error


class NotStarted(Exception):
    """The call's ``may_start`` said no when a thread came to it: it was not called."""


class DaemonThreads:
    """A pool of daemon threads running calls for event loops (any loop, any thread)."""

    def __init__(self, idle_seconds: float = IDLE_SECONDS) -> None:
        self.idle_seconds = idle_seconds
        self._work: queue.SimpleQueue[_Work] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0
        """Idle threads not yet counted on by a queued call."""

    @property
    def threads(self) -> int:
        """The threads alive now."""
        return self._threads

    async def run(
        self, func: Callable[..., T], *args: Any, may_start: Callable[[], bool] | None = None
    ) -> T:
        """``func(*args)`` in a thread, in a copy of the caller's context (as ``to_thread``).

        ``may_start``, when given, is asked in the thread right before the call: False raises
        :class:`NotStarted` instead (e.g. the attempt's lease ran out while it waited). A call
        whose caller was cancelled before a thread came to it is never made; cancelling the
        caller once it runs does not stop it (no thread can be stopped): the caller moves on,
        and the thread's result is dropped."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        context = contextvars.copy_context()
        self._work.put((loop, future, context, lambda: func(*args), may_start))
        self._grow()
        return await future

    def _grow(self) -> None:
        """A thread for the work just queued: an idle one, else a new one."""
        with self._lock:
            if self._idle:
                self._idle -= 1
                return
            self._threads += 1
        threading.Thread(target=self._serve, name="duetime-handler", daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                loop, future, context, call, may_start = self._work.get(timeout=self.idle_seconds)
            except queue.Empty:
                with self._lock:
                    if self._idle:  # no queued call counts on this thread: it may end
                        self._idle -= 1
                        self._threads -= 1
                        return
                continue
            result: Any = None
            error: BaseException | None = None
            if not future.cancelled():  # the caller has moved on: nobody wants the call
                try:
                    if may_start is not None and not may_start():
                        error = NotStarted()
                    else:
                        result = context.run(call)
                except Exception as exc:
                    error = exc
                except BaseException as exc:  # the call's, not the awaiting task's to obey
                    error = Escaped(exc)
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
