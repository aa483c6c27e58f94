"""The synchronous facade: :class:`App` runs :class:`AsyncApp` on a private event loop thread.

One thin wrapper instead of twin ``x``/``x_async`` methods: ``App.timers``, ``App.schedules``…
are the ``AsyncApp`` parts of the same name, each method run to completion
(:mod:`duetime.app.blocking`); ``App.schedule``, ``cancel``, ``get`` and ``emit`` are theirs.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

from duetime.app.blocking import (
    BlockingAudit,
    BlockingEvents,
    BlockingKeys,
    BlockingLimits,
    BlockingNamespaces,
    BlockingSchedules,
    BlockingSql,
    BlockingTimers,
    BlockingTokens,
    LoopThread,
)
from duetime.app.deprecation import moved, relay
from duetime.app.facade import AsyncApp
from duetime.app.runner import stopping_on_signals, work
from duetime.bus.routes import Route
from duetime.clock import Clock
from duetime.config import Settings
from duetime.destinations.base import Destination
from duetime.store import Store
from duetime.worker import WorkerStats

P = ParamSpec("P")
R = TypeVar("R")
F = TypeVar("F", bound=Callable[..., Any])


SIGNAL_CHECK = 0.25
"""Seconds :meth:`App.run_worker` waits at most at a time, so that the main thread runs the
handler of a SIGINT or SIGTERM delivered to another thread within this long."""


def _blocking(
    method: Callable[Concatenate[AsyncApp, P], Awaitable[R]],
) -> Callable[Concatenate[App, P], R]:
    """The app's own async ``method`` (not a part's), run to completion on the loop thread."""

    def call(self: App, /, *args: P.args, **kwargs: P.kwargs) -> R:
        async def run() -> R:
            return await method(self.core, *args, **kwargs)

        return self._portal.call(run())

    call.__name__ = method.__name__
    call.__qualname__ = f"App.{method.__name__}"
    call.__doc__ = method.__doc__
    call.__signature__ = inspect.signature(method)  # type: ignore[attr-defined]
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
        core = AsyncApp(
            database_url, namespace, clock=clock, settings=settings, store=store, **overrides
        )
        self.core = core
        portal = self._portal = LoopThread()
        self.timers = BlockingTimers(core.timers, portal, self.open)
        self.events = BlockingEvents(core.events, portal, self.open)
        self.schedules = BlockingSchedules(core.schedules, portal, self.open)
        self.limits = BlockingLimits(core.limits, portal, self.open)
        self.tokens = BlockingTokens(core.tokens, portal, self.open)
        self.audit = BlockingAudit(core.audit, portal, self.open)
        self.namespaces = BlockingNamespaces(core.namespaces, portal, self.open)
        self.sql = BlockingSql(core.sql, portal, self.open)
        self.keys = BlockingKeys(core.keys, portal, self.open)

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

    schedule = relay(BlockingTimers.schedule, "timers")
    cancel = relay(BlockingTimers.cancel, "timers")
    get = relay(BlockingTimers.get, "timers")
    emit = relay(BlockingEvents.emit, "events")
    maintain = _blocking(AsyncApp.maintain)
    tick = _blocking(AsyncApp.tick)
    migrate = _blocking(AsyncApp.migrate)
    nodes = _blocking(AsyncApp.nodes)

    # -- deprecated: the methods the parts took over ----------------------------------------
    schedule_many = moved(BlockingTimers.schedule_many, "timers")
    attempts = moved(BlockingTimers.attempts, "timers")
    moves = moved(BlockingTimers.moves, "timers")
    history = moved(BlockingTimers.history, "timers")
    dead = moved(BlockingTimers.dead, "timers")
    dead_types = moved(BlockingTimers.dead_types, "timers")
    counts = moved(BlockingTimers.counts, "timers")
    replay = moved(BlockingTimers.replay, "timers")
    run_now = moved(BlockingTimers.run_now, "timers")
    delete = moved(BlockingTimers.delete, "timers")
    bulk = moved(BlockingTimers.bulk, "timers")
    edit = moved(BlockingTimers.edit, "timers")
    types = moved(BlockingEvents.types, "events")
    activity = moved(BlockingEvents.activity, "events")
    charts = moved(BlockingEvents.charts, "events")
    subscribers = moved(BlockingEvents.subscribers, "events")
    unsubscribed = moved(BlockingEvents.unsubscribed, "events")
    audit_log = moved(BlockingAudit.log, "audit")
    add_schedule = moved(BlockingSchedules.add, "schedules")
    add_schedules = moved(BlockingSchedules.add_many, "schedules")
    get_schedule = moved(BlockingSchedules.get, "schedules")
    list_schedules = moved(BlockingSchedules.list, "schedules")
    update_schedule = moved(BlockingSchedules.update, "schedules")
    pause_schedule = moved(BlockingSchedules.pause, "schedules")
    resume_schedule = moved(BlockingSchedules.resume, "schedules")
    delete_schedule = moved(BlockingSchedules.delete, "schedules")
    preview = moved(BlockingSchedules.preview, "schedules")
    tzdata_diff = moved(BlockingSchedules.tzdata_diff, "schedules")
    run_next_now = moved(BlockingSchedules.run_next_now, "schedules")
    set_limit = moved(BlockingLimits.set, "limits")
    remove_limit = moved(BlockingLimits.remove, "limits")
    pause = moved(BlockingLimits.pause, "limits")
    resume = moved(BlockingLimits.resume, "limits")
    list_limits = moved(BlockingLimits.page, "limits")

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
