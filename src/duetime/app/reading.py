"""The reading part of the facade: one timer, its attempts and moves, listings, counts, the
event log and the charts.

:class:`ReadingMethods` is mixed into :class:`duetime.app.facade.AsyncApp`. Every listing checks
its page size and filter before it touches the store.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from duetime.bus.routes import check_pattern
from duetime.clock import Clock
from duetime.errors import InvalidInput, NotFound
from duetime.event_filters import activity_series, activity_window, event_filter
from duetime.model import Attempt, DeadType, Page, Status, Timer
from duetime.model.charts import ChartBucket, chart_series, chart_window
from duetime.model.finding import PayloadMatch
from duetime.model.history import ActivityMinute, LoggedEvent
from duetime.model.moves import TimerMove
from duetime.store import Store
from duetime.timer_filters import check_sort, timer_filter
from duetime.validation import check_limit, check_lookup_key

if TYPE_CHECKING:
    from duetime.store.parts import ScheduleStore


class ReadingMethods:
    """Read timers, their history and the namespace's figures."""

    store: Store
    clock: Clock
    namespace: str

    if TYPE_CHECKING:

        @property
        def schedules(self) -> ScheduleStore: ...

        async def open(self, *, create_namespace: bool | None = None) -> object: ...

    async def get(self, key: str) -> Timer:
        await self.open()
        timer = await self.store.get_timer(self.namespace, check_lookup_key(key))
        if timer is None:
            raise NotFound(
                f"no timer with key {key!r} in namespace {self.namespace!r}", field="key"
            )
        return timer

    async def attempts(self, key: str) -> list[Attempt]:
        timer = await self.get(key)
        return await self.store.list_attempts(timer.id)

    async def moves(self, key: str) -> list[TimerMove]:
        """The timer's moves by new zone rules (its wall time kept), oldest first."""
        timer = await self.get(key)
        return await self.schedules.list_timer_moves(timer.id)

    async def history(
        self,
        subject: str | None = None,
        *,
        status: Status | str | None = None,
        type: str | None = None,
        due_from: str | datetime | timedelta | None = None,
        due_until: str | datetime | timedelta | None = None,
        payload: str | PayloadMatch | None = None,
        sort: str | None = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> Page[Timer]:
        """Timers newest first, optionally of one subject / status / type (or ``order.*``
        glob) / due range ``[due_from, due_until)`` / payload field (``customer.id=42``);
        ``sort``: ``due`` (earliest first), ``updated`` (latest first), ``attempts`` (most
        first) instead; paginated by cursor."""
        await self.open()
        found = timer_filter(
            subject=subject,
            status=status,
            type=type,
            due_from=due_from,
            due_until=due_until,
            payload=payload,
            now=self.clock.now(),
        )
        if found.payload is not None:
            self.store.sealing.refuse(self.namespace, "payload")
        order = check_sort(sort or "newest")
        check_limit(limit)
        return await self.store.list_timers(self.namespace, found, cursor, limit, order)

    async def types(self, prefix: str = "", limit: int = 20) -> list[str]:
        """Known event types starting with ``prefix`` (the namespace's schedules' and its
        newest timers'), alphabetically: suggestions while one types."""
        await self.open()
        if not isinstance(prefix, str) or len(prefix) > 200:
            raise InvalidInput("prefix", "must be text of at most 200 characters")
        check_limit(limit)
        return await self.store.list_types(self.namespace, prefix, limit)

    async def dead(self, *, cursor: str | None = None, limit: int = 50) -> Page[Timer]:
        """The dead-letter queue: timers that ran out of attempts or were declared dead."""
        return await self.history(status=Status.DEAD, cursor=cursor, limit=limit)

    async def dead_types(self, limit: int = 20) -> list[DeadType]:
        """The dead-letter queue by event type, most first: what broke, and how much of it."""
        await self.open()
        check_limit(limit)
        return await self.store.dead_types(self.namespace, limit)

    async def counts(self) -> dict[Status, int]:
        """Timers by status in the hot table (on PostgreSQL, archived ones are not counted)."""
        await self.open()
        return await self.store.count_by_status(self.namespace)

    async def events(
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
        check_limit(limit)
        log_filter = event_filter(type, since, until, self.clock.now())
        await self.open()
        return await self.store.history.list_events(self.namespace, log_filter, cursor, limit)

    async def charts(
        self, range: str = "1h", *, type: str | None = None, node: str | None = None
    ) -> list[ChartBucket]:
        """Throughput and lateness (p50/p95/p99/max) over ``range`` (``1h``, ``24h``, ``7d``)
        in buckets, from the database: timers whose first attempt started in each, only of
        ``type`` (or glob) and first run on ``node`` when given."""
        await self.open()
        since, until, bucket = chart_window(self.clock.now(), range)
        if type is not None:
            check_pattern(type, "type")
        if node is not None and not (isinstance(node, str) and 0 < len(node) <= 200):
            raise InvalidInput("node", "must be a node id (text of at most 200 characters)")
        counts, lateness = await self.store.history.chart(
            self.namespace, since, until, bucket, type, node
        )
        return chart_series(since, until, bucket, counts, lateness)

    async def activity(self, minutes: int = 60) -> list[ActivityMinute]:
        """Throughput and lateness of the last ``minutes`` minutes, read from the database (so
        every node's work counts): per minute, the timers that fired, by status now, and how
        late they started (mean and max of ``fired_at - due_at``)."""
        since, until = activity_window(self.clock.now(), minutes)
        await self.open()
        counts = await self.store.history.activity(self.namespace, since, until)
        return activity_series(counts, since, minutes)
