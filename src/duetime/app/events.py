"""The events part of an app (``app.events``): emit one now, read the event log and the charts,
and ask who would deliver what.

Who would deliver reads the nodes table (each node's handlers and routes, kept there by its
heartbeat): one query answers for every timer a request shows (:mod:`duetime.bus.subscribers`).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from duetime.app.context import AppContext
from duetime.app.deprecation import warn_moved
from duetime.app.timers import Timers
from duetime.bus.routes import check_pattern
from duetime.bus.subscribers import Subscribers
from duetime.errors import InvalidInput
from duetime.event_filters import activity_series, activity_window, event_filter
from duetime.model import JSON, Page, PutResult
from duetime.model.charts import ChartBucket, chart_series, chart_window
from duetime.model.history import ActivityMinute, LoggedEvent
from duetime.validation import check_limit


class Events:
    """Emit events, and read what fired: the log, its types, its charts, its subscribers."""

    def __init__(self, context: AppContext, timers: Timers) -> None:
        self._context = context
        self._timers = timers

    async def emit(
        self,
        type: str,
        payload: JSON = None,
        *,
        key: str | None = None,
        subject: str | None = None,
        correlation_id: str | None = None,
        max_attempts: int | None = None,
        priority: int | None = None,
        transaction: object | None = None,
    ) -> PutResult:
        """Emit an event now: a timer due at once, delivered like any other.

        ``transaction``: the caller's own transaction, as for ``schedule`` — the event exists,
        and is delivered, only if that transaction commits (the transactional outbox).
        """
        return await self._timers.schedule(
            type,
            payload,
            delay=0,
            key=key,
            subject=subject,
            correlation_id=correlation_id,
            max_attempts=max_attempts,
            priority=priority,
            on_conflict="keep",
            transaction=transaction,
        )

    async def log(
        self,
        *,
        type: str | None = None,
        since: str | datetime | timedelta | None = None,
        until: str | datetime | timedelta | None = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> Page[LoggedEvent]:
        """The event log: timers that fired, newest first, each with its deliveries (attempts).

        ``type`` is an exact type or a glob (``order.*``); ``since`` (inclusive) and ``until``
        bound when they fired: ISO 8601 instants, or durations meaning that long ago (``PT1H``).
        Archived timers are included; pruned ones (past ``retention``) are gone.
        """
        context = self._context
        check_limit(limit)
        log_filter = event_filter(type, since, until, context.clock.now())
        await context.open()
        return await context.store.history.list_events(context.namespace, log_filter, cursor, limit)

    async def __call__(
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
        return await self.log(type=type, since=since, until=until, cursor=cursor, limit=limit)

    async def types(self, prefix: str = "", limit: int = 20) -> list[str]:
        """Known event types starting with ``prefix`` (the namespace's schedules' and its
        newest timers'), alphabetically: suggestions while one types."""
        context = self._context
        await context.open()
        if not isinstance(prefix, str) or len(prefix) > 200:
            raise InvalidInput("prefix", "must be text of at most 200 characters")
        check_limit(limit)
        return await context.store.list_types(context.namespace, prefix, limit)

    async def charts(
        self, range: str = "1h", *, type: str | None = None, node: str | None = None
    ) -> list[ChartBucket]:
        """Throughput and lateness (p50/p95/p99/max) over ``range`` (``1h``, ``24h``, ``7d``)
        in buckets, from the database: timers whose first attempt started in each, only of
        ``type`` (or glob) and first run on ``node`` when given."""
        context = self._context
        await context.open()
        since, until, bucket = chart_window(context.clock.now(), range)
        if type is not None:
            check_pattern(type, "type")
        if node is not None and not (isinstance(node, str) and 0 < len(node) <= 200):
            raise InvalidInput("node", "must be a node id (text of at most 200 characters)")
        counts, lateness = await context.store.history.chart(
            context.namespace, since, until, bucket, type, node
        )
        return chart_series(since, until, bucket, counts, lateness)

    async def activity(self, minutes: int = 60) -> list[ActivityMinute]:
        """Throughput and lateness of the last ``minutes`` minutes, read from the database (so
        every node's work counts): per minute, the timers that fired, by status now, and how
        late they started (mean and max of ``fired_at - due_at``)."""
        context = self._context
        since, until = activity_window(context.clock.now(), minutes)
        await context.open()
        counts = await context.store.history.activity(context.namespace, since, until)
        return activity_series(counts, since, minutes)

    async def subscribers(self) -> Subscribers:
        """The live nodes (heartbeat younger than the lease) and what each takes here: ask it
        how many would deliver a timer (:meth:`Subscribers.count`; 0 = no subscriber)."""
        context = self._context
        await context.open()
        nodes = await context.store.list_nodes()
        return Subscribers.of(nodes, context.namespace, context.clock.now(), context.settings.lease)

    async def unsubscribed(
        self, limit: int = 20, *, subscribers: Subscribers | None = None
    ) -> list[tuple[str, int]]:
        """Pending timers that no live node would deliver, counted by type, most first."""
        check_limit(limit)
        found = subscribers if subscribers is not None else await self.subscribers()
        return await self._context.store.unsubscribed_types(
            self._context.namespace, found.everyone(), limit
        )
