"""The blocking twins of the app's parts: ``App.timers``, ``App.schedules``… run the
``AsyncApp`` part's method of the same name to completion on the app's private event loop.

One line a method (``get = blocking(Timers.get)``) instead of twin ``x``/``x_async`` methods:
each keeps its async twin's signature and docstring, and ``tests/unit/test_app_shape.py`` checks
that every part's every method has its twin here.
"""

from __future__ import annotations

import asyncio
import builtins
import functools
import inspect
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from datetime import datetime, timedelta
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar

from duetime.app.audit import Audit
from duetime.app.deprecation import warn_moved
from duetime.app.events import Events
from duetime.app.keys import Keys
from duetime.app.limits import Limits
from duetime.app.namespaces import Namespaces
from duetime.app.outbox import held_blocking, run_now
from duetime.app.schedules import Schedules
from duetime.app.sql_access import Sql
from duetime.app.timers import Timers
from duetime.app.tokens import Tokens
from duetime.model import NewTimer, Page
from duetime.model.flow_rules import FlowStatus
from duetime.model.history import LoggedEvent
from duetime.requests import TimerRequest
from duetime.support import eventloop

P = ParamSpec("P")
R = TypeVar("R")
PartT = TypeVar("PartT")


class LoopThread:
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


class BlockingPart(Generic[PartT]):
    """A part of an ``AsyncApp`` (:attr:`core`), called from blocking code through the loop
    thread; ``open`` opens the blocking app (a call given a ``transaction`` runs here, in the
    caller's thread, so it opens the app first)."""

    def __init__(self, core: PartT, portal: LoopThread, open: Callable[[], object]) -> None:
        self.core = core
        self._portal = portal
        self._open = open


def blocking(
    method: Callable[Concatenate[PartT, P], Awaitable[R]],
) -> Callable[Concatenate[BlockingPart[PartT], P], R]:
    """The part's async ``method``, run to completion on the loop thread."""

    def call(self: BlockingPart[PartT], /, *args: P.args, **kwargs: P.kwargs) -> R:
        async def run() -> R:
            return await method(self.core, *args, **kwargs)

        return self._portal.call(run())

    call.__name__ = method.__name__
    call.__qualname__ = method.__qualname__
    call.__doc__ = method.__doc__
    # help() and editors show the async method's parameters, not (*args, **kwargs)
    call.__signature__ = inspect.signature(method)  # type: ignore[attr-defined]
    return call


def joining(
    method: Callable[Concatenate[PartT, P], Awaitable[R]],
) -> Callable[Concatenate[BlockingPart[PartT], P], R]:
    """:func:`blocking`, but given a ``transaction=`` the method runs here, in the caller's
    thread, on the caller's own blocking connection (never on the loop thread: a driver
    connection belongs to the thread using it); see :mod:`duetime.app.outbox`."""
    on_loop = blocking(method)

    def call(self: BlockingPart[PartT], /, *args: P.args, **kwargs: P.kwargs) -> R:
        transaction = kwargs.get("transaction")
        if transaction is None:
            return on_loop(self, *args, **kwargs)
        self._open()
        kwargs["transaction"] = held_blocking(transaction)
        return run_now(method(self.core, *args, **kwargs))  # type: ignore[arg-type]

    functools.update_wrapper(call, on_loop)
    return call


class BlockingTimers(BlockingPart[Timers]):
    """``App.timers``: :class:`~duetime.app.timers.Timers`, blocking."""

    schedule = joining(Timers.schedule)
    schedule_many = joining(Timers.schedule_many)
    put = joining(Timers.put)
    cancel = joining(Timers.cancel)
    get = blocking(Timers.get)
    attempts = blocking(Timers.attempts)
    moves = blocking(Timers.moves)
    history = blocking(Timers.history)
    dead = blocking(Timers.dead)
    dead_types = blocking(Timers.dead_types)
    counts = blocking(Timers.counts)
    delete = blocking(Timers.delete)
    replay = blocking(Timers.replay)
    run_now = blocking(Timers.run_now)
    bulk = blocking(Timers.bulk)
    edit = blocking(Timers.edit)

    def prepare(self, requests: Iterable[TimerRequest]) -> list[NewTimer]:
        """Validate requests into storable timers (raises InvalidInput naming the field)."""
        return self.core.prepare(requests)


class BlockingEvents(BlockingPart[Events]):
    """``App.events``: :class:`~duetime.app.events.Events`, blocking."""

    emit = joining(Events.emit)
    log = blocking(Events.log)
    types = blocking(Events.types)
    charts = blocking(Events.charts)
    activity = blocking(Events.activity)
    subscribers = blocking(Events.subscribers)
    unsubscribed = blocking(Events.unsubscribed)

    def __call__(
        self,
        *,
        type: str | None = None,
        since: str | datetime | timedelta | None = None,
        until: str | datetime | timedelta | None = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> Page[LoggedEvent]:
        """Deprecated: ``app.events(...)`` is :meth:`log`."""
        warn_moved("events()", "events.log()")
        return self.log(type=type, since=since, until=until, cursor=cursor, limit=limit)


class BlockingSchedules(BlockingPart[Schedules]):
    """``App.schedules``: :class:`~duetime.app.schedules.Schedules`, blocking."""

    add = blocking(Schedules.add)
    add_many = blocking(Schedules.add_many)
    get = blocking(Schedules.get)
    list = blocking(Schedules.list)
    update = blocking(Schedules.update)
    pause = blocking(Schedules.pause)
    resume = blocking(Schedules.resume)
    delete = blocking(Schedules.delete)
    preview = blocking(Schedules.preview)
    tzdata_diff = blocking(Schedules.tzdata_diff)
    run_next_now = blocking(Schedules.run_next_now)
    misses = blocking(Schedules.misses)
    backfill = blocking(Schedules.backfill)


class BlockingLimits(BlockingPart[Limits]):
    """``App.limits``: :class:`~duetime.app.limits.Limits`, blocking."""

    set = blocking(Limits.set)
    remove = blocking(Limits.remove)
    pause = blocking(Limits.pause)
    resume = blocking(Limits.resume)
    list = blocking(Limits.list)
    page = blocking(Limits.page)

    def __call__(self) -> builtins.list[FlowStatus]:
        """Deprecated: ``app.limits()`` is :meth:`list`."""
        warn_moved("limits()", "limits.list()")
        return self.list()


class BlockingTokens(BlockingPart[Tokens]):
    """``App.tokens``: :class:`~duetime.app.tokens.Tokens`, blocking."""

    issue = blocking(Tokens.issue)
    list = blocking(Tokens.list)
    page = blocking(Tokens.page)
    revoke = blocking(Tokens.revoke)


class BlockingAudit(BlockingPart[Audit]):
    """``App.audit``: :class:`~duetime.app.audit.Audit`, blocking."""

    log = blocking(Audit.log)
    record = blocking(Audit.record)
    record_put = blocking(Audit.record_put)
    note = blocking(Audit.note)


class BlockingNamespaces(BlockingPart[Namespaces]):
    """``App.namespaces``: :class:`~duetime.app.namespaces.Namespaces`, blocking."""

    add = blocking(Namespaces.add)
    list = blocking(Namespaces.list)
    page = blocking(Namespaces.page)

    def __call__(self) -> builtins.list[str]:
        """Deprecated: ``app.namespaces()`` is :meth:`list`."""
        warn_moved("namespaces()", "namespaces.list()")
        return self.list()


class BlockingSql(BlockingPart[Sql]):
    """``App.sql``: :class:`~duetime.app.sql_access.Sql`, blocking."""

    grant = blocking(Sql.grant)
    revoke = blocking(Sql.revoke)
    grants = blocking(Sql.grants)


class BlockingKeys(BlockingPart[Keys]):
    """``App.keys``: :class:`~duetime.app.keys.Keys`, blocking."""

    rotate = blocking(Keys.rotate)
