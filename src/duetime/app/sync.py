"""The synchronous facade: :class:`App` runs :class:`AsyncApp` on a private event loop thread.

One thin wrapper instead of twin ``x``/``x_async`` methods: every method of ``App`` is the
``AsyncApp`` method of the same name, run to completion.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

from duetime.app.facade import AsyncApp
from duetime.app.outbox import held_blocking, run_now
from duetime.app.runner import stopping_on_signals, work
from duetime.bus.routes import Route
from duetime.clock import Clock
from duetime.config import Settings
from duetime.destinations.base import Destination
from duetime.store import Store
from duetime.support import eventloop
from duetime.worker import WorkerStats

P = ParamSpec("P")
R = TypeVar("R")
F = TypeVar("F", bound=Callable[..., Any])


SIGNAL_CHECK = 0.25
"""Seconds :meth:`App.run_worker` waits at most at a time, so that the main thread runs the
handler of a SIGINT or SIGTERM delivered to another thread within this long."""


class _LoopThread:
    """An event loop on a daemon thread, started on first use."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = eventloop.loop_factory()()
                thread = threading.Thread(target=loop.run_forever, name="duetime-loop", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def call(self, coro: Coroutine[Any, Any, R]) -> R:
        return asyncio.run_coroutine_threadsafe(coro, self.loop()).result()

    def stop(self) -> None:
        with self._lock:
            if self._loop is None or self._thread is None:
                return
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()
            self._loop = self._thread = None


def _blocking(
    method: Callable[Concatenate[AsyncApp, P], Awaitable[R]],
) -> Callable[Concatenate[App, P], R]:
    def call(self: App, /, *args: P.args, **kwargs: P.kwargs) -> R:
        async def run() -> R:
            return await method(self.core, *args, **kwargs)

        return self._portal.call(run())

    call.__name__ = method.__name__
    call.__qualname__ = f"App.{method.__name__}"
    call.__doc__ = method.__doc__
    # help() and editors show the async method's parameters, not (*args, **kwargs)
    call.__signature__ = inspect.signature(method)  # type: ignore[attr-defined]
    return call


def _joining(
    method: Callable[Concatenate[AsyncApp, P], Awaitable[R]],
) -> Callable[Concatenate[App, P], R]:
    """:func:`_blocking`, but given a ``transaction=`` the method runs here, in the caller's
    thread, on the caller's own blocking connection (never on the loop thread: a driver
    connection belongs to the thread using it); see :mod:`duetime.app.outbox`."""
    blocking = _blocking(method)

    def call(self: App, /, *args: P.args, **kwargs: P.kwargs) -> R:
        transaction = kwargs.get("transaction")
        if transaction is None:
            return blocking(self, *args, **kwargs)
        self.open()
        kwargs["transaction"] = held_blocking(transaction)
        return run_now(method(self.core, *args, **kwargs))  # type: ignore[arg-type]

    functools.update_wrapper(call, blocking)
    return call


class App:
    """duetime on one database and one namespace, for ordinary (blocking) code."""

    def __init__(
        self,
        database_url: str | None = None,
        namespace: str | None = None,
        *,
        clock: Clock | None = None,
        settings: Settings | None = None,
        store: Store | None = None,
        **overrides: Any,
    ) -> None:
        self.core = AsyncApp(
            database_url, namespace, clock=clock, settings=settings, store=store, **overrides
        )
        self._portal = _LoopThread()

    @property
    def namespace(self) -> str:
        return self.core.namespace

    @property
    def settings(self) -> Settings:
        return self.core.settings

    def handler(self, type: str, *, transactional: bool = False) -> Callable[[F], F]:
        """Register the decorated function (sync or async) for events of ``type``."""
        return self.core.handler(type, transactional=transactional)

    def add_destination(self, destination: Destination) -> Destination:
        """Make ``destination`` available to routes by its name (see AsyncApp.add_destination)."""
        return self.core.add_destination(destination)

    def route(self, type: str, *, to: Destination | str | Sequence[Destination | str]) -> Route:
        """Send events of ``type`` (exact or a glob) to destinations (see AsyncApp.route)."""
        return self.core.route(type, to=to)

    @property
    def producer(self) -> str | None:
        return self.core.producer

    schedule = _joining(AsyncApp.schedule)
    schedule_many = _joining(AsyncApp.schedule_many)
    emit = _joining(AsyncApp.emit)
    get = _blocking(AsyncApp.get)
    attempts = _blocking(AsyncApp.attempts)
    moves = _blocking(AsyncApp.moves)
    cancel = _joining(AsyncApp.cancel)
    history = _blocking(AsyncApp.history)
    types = _blocking(AsyncApp.types)
    dead = _blocking(AsyncApp.dead)
    dead_types = _blocking(AsyncApp.dead_types)
    replay = _blocking(AsyncApp.replay)
    run_now = _blocking(AsyncApp.run_now)
    delete = _blocking(AsyncApp.delete)
    bulk = _blocking(AsyncApp.bulk)
    audit_log = _blocking(AsyncApp.audit_log)
    counts = _blocking(AsyncApp.counts)
    events = _blocking(AsyncApp.events)
    activity = _blocking(AsyncApp.activity)
    charts = _blocking(AsyncApp.charts)
    edit = _blocking(AsyncApp.edit)
    run_next_now = _blocking(AsyncApp.run_next_now)
    maintain = _blocking(AsyncApp.maintain)
    tick = _blocking(AsyncApp.tick)
    migrate = _blocking(AsyncApp.migrate)
    nodes = _blocking(AsyncApp.nodes)
    subscribers = _blocking(AsyncApp.subscribers)
    unsubscribed = _blocking(AsyncApp.unsubscribed)
    add_schedule = _blocking(AsyncApp.add_schedule)
    add_schedules = _blocking(AsyncApp.add_schedules)
    get_schedule = _blocking(AsyncApp.get_schedule)
    list_schedules = _blocking(AsyncApp.list_schedules)
    update_schedule = _blocking(AsyncApp.update_schedule)
    pause_schedule = _blocking(AsyncApp.pause_schedule)
    resume_schedule = _blocking(AsyncApp.resume_schedule)
    delete_schedule = _blocking(AsyncApp.delete_schedule)
    preview = _blocking(AsyncApp.preview)
    tzdata_diff = _blocking(AsyncApp.tzdata_diff)
    set_limit = _blocking(AsyncApp.set_limit)
    remove_limit = _blocking(AsyncApp.remove_limit)
    pause = _blocking(AsyncApp.pause)
    resume = _blocking(AsyncApp.resume)
    limits = _blocking(AsyncApp.limits)
    list_limits = _blocking(AsyncApp.list_limits)

    def open(self) -> App:
        if not self.core.is_open:
            self._portal.call(self.core.open())
        return self

    def close(self) -> None:
        try:
            self._portal.call(self.core.close())
        finally:
            self._portal.stop()

    def __enter__(self) -> App:
        return self.open()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def run_worker(self) -> WorkerStats:
        """Work until SIGINT/SIGTERM, then finish in-flight handlers and return.

        The worker runs on this app's own event loop, so its handlers may call the app
        (``app.schedule`` a follow-up) while it works, and the app may have been used before:
        its connections belong to that one loop."""
        stop = asyncio.Event()
        loop = self._portal.loop()
        with stopping_on_signals(lambda: loop.call_soon_threadsafe(stop.set)):
            working = asyncio.run_coroutine_threadsafe(work(self.core, stop), loop)
            while True:
                # Python runs a signal's handler in the main thread, between two bytecodes:
                # a SIGTERM the kernel gave to another thread (a handler's, say) does not
                # interrupt an endless wait here, and the worker would never hear it.
                try:
                    return working.result(timeout=SIGNAL_CHECK)
                except TimeoutError:
                    continue
