"""What the schedules part reads: one schedule, a listing, a preview of a rule's next
occurrences, and what new tz rules would move.

:class:`ScheduleReads` is the base of :class:`~duetime.app.schedules.Schedules` (which changes
schedules, reading them through it).
"""

from __future__ import annotations

import builtins
import functools
from collections.abc import Sequence
from dataclasses import replace
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from duetime.app.context import AppContext
from duetime.app.schedule_watch import with_watch
from duetime.errors import InvalidInput, NotFound
from duetime.model import Page, Schedule
from duetime.model.deadlines import RecordedMiss as Miss
from duetime.revisions import preview_occurrences
from duetime.schedules import ScheduleFilter, ScheduleRequest, check_schedule_name
from duetime.store.parts import ScheduleStore
from duetime.support.cpu_work import run_cpu_work
from duetime.validation import check_limit, check_type

if TYPE_CHECKING:
    from duetime.services.deadlines import DeadlineWatch
    from duetime.services.materializer import Materializer
    from duetime.services.tzdata_diff import ZoneMove


class ScheduleReads:
    """Read schedules and preview rules."""

    def __init__(self, context: AppContext) -> None:
        self._context = context

    @property
    def _stored(self) -> ScheduleStore:
        """The store's schedules part."""
        return self._context.store.schedules

    async def get(self, name: str) -> Schedule:
        """The schedule ``name``; NotFound naming ``name`` when there is none."""
        await self._context.open()
        namespace = self._context.namespace
        schedule = await self._stored.get_schedule(namespace, check_schedule_name(name))
        if schedule is None:
            raise self._missing(name)
        (schedule,) = await with_watch(self._context.store, [schedule])
        return schedule

    async def list(
        self,
        *,
        subject: str | None = None,
        type: str | None = None,
        active: bool | None = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> Page[Schedule]:
        """Schedules by name, optionally of one subject / type / state; paginated."""
        await self._context.open()
        if type is not None:
            check_type(type)
        check_limit(limit)
        schedule_filter = ScheduleFilter(subject=subject, type=type, active=active)
        namespace = self._context.namespace
        found = await self._stored.list_schedules(namespace, schedule_filter, cursor, limit)
        return replace(found, items=await with_watch(self._context.store, found.items))

    async def misses(self, name: str | None = None, *, limit: int = 50) -> builtins.list[Miss]:
        """The latest occurrences not done by their deadline (of one schedule, or of all),
        newest first (see docs/schedules.md#deadlines)."""
        check_limit(limit)
        schedule_id = None if name is None else (await self.get(name)).id
        await self._context.open()
        return await self._context.store.deadlines.misses(
            self._context.namespace, schedule_id, limit
        )

    def deadline_watch(self, /, **options: Any) -> DeadlineWatch:
        """The deadline watch of this app's namespace (``tick()`` or ``run(stop)``)."""
        from duetime.services.deadlines import DeadlineWatch

        context = self._context
        options.setdefault("max_attempts", context.settings.max_attempts)
        return DeadlineWatch(context.store, context.clock, context.namespace, **options)

    async def preview(
        self,
        cron: str | None = None,
        *,
        every: str | int | float | timedelta | None = None,
        timezone: str = "UTC",
        on_gap: str = "run_after",
        on_overlap: str = "once",
        start_at: str | datetime | None = None,
        end_at: str | datetime | None = None,
        after: str | datetime | None = None,
        count: int = 5,
        schedule: str | None = None,
        rrule: str | None = None,
        dtstart: str | datetime | None = None,
        exdates: Sequence[str | datetime] | None = None,
        rdates: Sequence[str | datetime] | None = None,
        holidays: str | None = None,
        holiday_dates: Sequence[str | date] | None = None,
        weekend: str | Sequence[str] | None = None,
        roll: str | None = None,
        feb29: str = "feb28",
    ) -> builtins.list[datetime]:
        """The next ``count`` occurrences (UTC) of a rule, or of the stored ``schedule``.

        From ``after`` (default: now; for a stored schedule, its next occurrence on; for an
        ``rrule``, its DTSTART on, DTSTART included when it matches).
        """
        calendar = ScheduleRequest(
            name="preview",
            type="preview",
            rrule=rrule,
            dtstart=dtstart,
            exdates=exdates,
            rdates=rdates,
            holidays=holidays,
            holiday_dates=holiday_dates,
            weekend=weekend,
            roll=roll,
            feb29=feb29,
        ).calendar_options()
        stored = await self.get(schedule) if schedule is not None else None
        # Expanding a rule is CPU work (bounded by its budget): off the event loop.
        return await run_cpu_work(
            functools.partial(
                preview_occurrences,
                stored,
                cron=cron,
                every=every,
                timezone=timezone,
                on_gap=on_gap,
                on_overlap=on_overlap,
                start_at=start_at,
                end_at=end_at,
                after=after,
                count=count,
                now=self._context.clock.now(),
                rrule=rrule,
                calendar=calendar,
            )
        )

    def _missing(self, name: str) -> NotFound:
        where = f"in namespace {self._context.namespace!r}"
        return NotFound(f"no schedule named {name!r} {where}", field="name")

    async def tzdata_diff(self, zoneinfo: str, *, count: int = 5) -> builtins.list[ZoneMove]:
        """What the tz rules compiled in the folder ``zoneinfo`` would move: every pending
        local-form timer and each schedule's next ``count`` occurrences (all namespaces: tz data
        is the installation's). Nothing is changed."""
        from duetime.services.tzdata_diff import tzdata_diff

        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= 1000:
            raise InvalidInput("count", "must be a whole number from 1 to 1000")
        await self._context.open()
        return await tzdata_diff(self._stored, zoneinfo, self._context.clock.now(), count)

    def materializer(self, /, **options: Any) -> Materializer:
        """A schedule materialiser for this app's namespace (``tick()`` or ``run(stop)``)."""
        from duetime.services.materializer import Materializer

        context = self._context
        return Materializer(context.store, context.clock, context.namespace, **options)
