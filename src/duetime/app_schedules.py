"""The schedules part of the facade: add, read, change, pause, delete and preview schedules.

:class:`ScheduleMethods` is mixed into :class:`duetime.app.AsyncApp`; it needs only the app's
store, clock, namespace, settings and ``open()``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from duetime.app_audit import AuditMethods
from duetime.clock import Clock
from duetime.config import Settings
from duetime.errors import Conflict, InvalidInput, NotFound
from duetime.model import JSON, OnConflict, Page, Schedule
from duetime.model.audit import Actor
from duetime.model.schedules import NewSchedule
from duetime.recurrence.calendar import CALENDAR_FIELDS
from duetime.recurrence.overlap import DEFAULT_CATCH_UP_GRACE
from duetime.schedules import (
    UNSET,
    RuleCache,
    ScheduleAction,
    ScheduleFilter,
    ScheduleRequest,
    Unset,
    check_schedule_name,
    preview_occurrences,
    revise,
)
from duetime.store import Store
from duetime.store.parts import ScheduleStore
from duetime.store.room import ScheduleRoom
from duetime.validation import check_limit, check_on_conflict, check_type

if TYPE_CHECKING:
    from duetime.services.materializer import Materializer
    from duetime.services.tzdata_diff import ZoneMove

_REVISE_TRIES = 20


class ScheduleMethods(AuditMethods):
    """Schedules are data: each occurrence becomes an ordinary timer (see docs/schedules.md)."""

    store: Store
    clock: Clock
    namespace: str
    settings: Settings

    if TYPE_CHECKING:

        @property
        def is_open(self) -> bool:
            """Provided by the app: whether open has run."""

    @property
    def schedules(self) -> ScheduleStore:
        """The store's schedules part."""
        return self.store.schedules

    async def add_schedule(
        self,
        name: str,
        type: str,
        payload: JSON = None,
        *,
        cron: str | None = None,
        every: str | int | float | timedelta | None = None,
        timezone: str = "UTC",
        subject: str | None = None,
        start_at: str | datetime | None = None,
        end_at: str | datetime | None = None,
        catch_up: str = "latest",
        on_gap: str = "run_after",
        on_overlap: str = "once",
        active: bool | None = None,
        max_attempts: int | None = None,
        on_conflict: OnConflict = "update",
        overlap: str = "allow",
        catch_up_grace: str | int | float | timedelta = DEFAULT_CATCH_UP_GRACE,
        rrule: str | None = None,
        dtstart: str | datetime | None = None,
        exdates: Sequence[str | datetime] | None = None,
        rdates: Sequence[str | datetime] | None = None,
        holidays: str | None = None,
        holiday_dates: Sequence[str | date] | None = None,
        weekend: str | Sequence[str] | None = None,
        roll: str | None = None,
        feb29: str = "feb28",
    ) -> tuple[ScheduleAction, Schedule]:
        """Create the schedule ``name``, or bring an existing one to this definition.

        ``active=None`` creates it active and leaves an existing one paused or running as it
        is. The answer says ``created``, ``updated`` or ``kept`` (``on_conflict='keep'``, or
        the stored schedule already had this definition). ``overlap`` says what an occurrence
        due while an earlier one is unfinished does (``allow`` | ``skip`` | ``buffer_one``);
        ``catch_up_grace`` how late one may be and still fire before ``catch_up`` decides.

        ``rrule`` (instead of ``cron``/``every``) is an RFC 5545 recurrence rule from
        ``dtstart``, a local time in ``timezone``; ``exdates``/``rdates`` remove and add local
        times; ``holidays`` (``DE-BE``), ``holiday_dates``, ``weekend`` and ``roll``
        (``skip`` | ``forward`` | ``backward``) keep it on business days; ``feb29`` says what
        a yearly rule on 29 February does in common years (see docs/schedules.md).
        """
        request = ScheduleRequest(
            name=name,
            type=type,
            payload=payload,
            cron=cron,
            every=every,
            timezone=timezone,
            subject=subject,
            start_at=start_at,
            end_at=end_at,
            catch_up=catch_up,
            on_gap=on_gap,
            on_overlap=on_overlap,
            active=True if active is None else active,
            max_attempts=max_attempts,
            overlap=overlap,
            catch_up_grace=catch_up_grace,
            rrule=rrule,
            dtstart=dtstart,
            exdates=exdates,
            rdates=rdates,
            holidays=holidays,
            holiday_dates=holiday_dates,
            weekend=weekend,
            roll=roll,
            feb29=feb29,
        )
        (result,) = await self.add_schedules(
            [request], on_conflict=on_conflict, keep_active=active is None
        )
        return result

    async def add_schedules(
        self,
        requests: Iterable[ScheduleRequest],
        *,
        on_conflict: OnConflict = "update",
        keep_active: bool = False,
    ) -> list[tuple[ScheduleAction, Schedule]]:
        """Create many schedules in one transaction (all or, on bad input, none); see
        add_schedule. Each is validated as the store reads it, so the store can send the first
        while the rest are still being validated."""
        check_on_conflict(on_conflict)
        requests = list(requests)
        now = self.clock.now()
        news: Iterable[NewSchedule] = self._resolve_schedules(requests, now)
        if not self.is_open:  # opening creates the namespace: not for a batch that is refused
            news = list(news)
        await self.open()
        stored = await self.schedules.put_schedules(
            news, on_conflict, now, self._schedule_room(requests)
        )
        results: list[tuple[ScheduleAction, Schedule]] = []
        for request, row in zip(requests, stored, strict=True):
            if row is not None:
                results.append(("created", row))
                continue
            if on_conflict == "keep":
                results.append(("kept", await self.get_schedule(request.name)))
                continue

            def define(current: Schedule, request: ScheduleRequest = request) -> ScheduleRequest:
                return replace(request, active=current.active) if keep_active else request

            changed, schedule = await self._revise(request.name, define)
            results.append(("updated" if changed else "kept", schedule))
        return results

    def _resolve_schedules(
        self, requests: list[ScheduleRequest], now: datetime
    ) -> Iterator[NewSchedule]:
        """Each request validated as it is read; a bad one raises InvalidInput naming its
        field, behind its index (``[3].cron``) unless it is the only request."""
        namespace, settings = self.namespace, self.settings
        rules: RuleCache = {}
        for index, request in enumerate(requests):
            try:
                yield request.resolve(
                    namespace,
                    now,
                    settings.max_attempts,
                    settings.max_payload_bytes,
                    rules=rules,
                )
            except InvalidInput as exc:
                if len(requests) == 1:
                    raise
                raise InvalidInput(f"[{index}].{exc.field}", exc.message) from exc

    def _schedule_room(self, requests: Sequence[ScheduleRequest]) -> ScheduleRoom:
        """The new schedules among ``requests`` must leave the namespace within
        ``max_schedules``: the store checks it as it stores them (CapReached naming ``name``
        otherwise, and nothing is stored)."""
        names = sorted({r.name for r in requests if isinstance(r.name, str)})
        return ScheduleRoom(self.namespace, names, self.settings.max_schedules)

    async def get_schedule(self, name: str) -> Schedule:
        await self.open()
        schedule = await self.schedules.get_schedule(self.namespace, check_schedule_name(name))
        if schedule is None:
            raise self._missing(name)
        return schedule

    async def list_schedules(
        self,
        *,
        subject: str | None = None,
        type: str | None = None,
        active: bool | None = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> Page[Schedule]:
        """Schedules by name, optionally of one subject / type / state; paginated."""
        await self.open()
        if type is not None:
            check_type(type)
        check_limit(limit)
        schedule_filter = ScheduleFilter(subject=subject, type=type, active=active)
        return await self.schedules.list_schedules(self.namespace, schedule_filter, cursor, limit)

    async def update_schedule(
        self,
        name: str,
        *,
        type: str | Unset = UNSET,
        payload: JSON | Unset = UNSET,
        cron: str | Unset | None = UNSET,
        every: str | int | float | timedelta | Unset | None = UNSET,
        timezone: str | Unset = UNSET,
        subject: str | Unset | None = UNSET,
        start_at: str | datetime | Unset | None = UNSET,
        end_at: str | datetime | Unset | None = UNSET,
        catch_up: str | Unset = UNSET,
        on_gap: str | Unset = UNSET,
        on_overlap: str | Unset = UNSET,
        max_attempts: int | Unset = UNSET,
        active: bool | Unset = UNSET,
        overlap: str | Unset = UNSET,
        catch_up_grace: str | int | float | timedelta | Unset = UNSET,
        rrule: str | Unset | None = UNSET,
        dtstart: str | datetime | Unset | None = UNSET,
        exdates: Sequence[str | datetime] | Unset | None = UNSET,
        rdates: Sequence[str | datetime] | Unset | None = UNSET,
        holidays: str | Unset | None = UNSET,
        holiday_dates: Sequence[str | date] | Unset | None = UNSET,
        weekend: str | Sequence[str] | Unset | None = UNSET,
        roll: str | Unset | None = UNSET,
        feb29: str | Unset = UNSET,
    ) -> Schedule:
        """Change some fields (None clears an optional one); the next occurrence is recomputed.

        Giving ``cron``, ``every`` or ``rrule`` switches the schedule to that kind of rule.
        """
        changes: dict[str, Any] = {
            key: value
            for key, value in {
                "type": type,
                "payload": payload,
                "cron": cron,
                "every": every,
                "timezone": timezone,
                "subject": subject,
                "start_at": start_at,
                "end_at": end_at,
                "catch_up": catch_up,
                "on_gap": on_gap,
                "on_overlap": on_overlap,
                "max_attempts": max_attempts,
                "active": active,
                "overlap": overlap,
                "catch_up_grace": catch_up_grace,
                "rrule": rrule,
                "dtstart": dtstart,
                "exdates": exdates,
                "rdates": rdates,
                "holidays": holidays,
                "holiday_dates": holiday_dates,
                "weekend": weekend,
                "roll": roll,
                "feb29": feb29,
            }.items()
            if value is not UNSET
        }
        kinds = ("cron", "every", "rrule")
        for kind in kinds:
            if changes.get(kind) is not None:
                for other in kinds:
                    changes.setdefault(other, None)
        if changes.get("rrule", UNSET) is None:  # no longer a calendar rule
            changes.update(dict.fromkeys(CALENDAR_FIELDS[1:]), feb29="feb28")

        def define(current: Schedule) -> ScheduleRequest:
            return replace(ScheduleRequest.of(current), **changes)

        await self.open()
        return (await self._revise(check_schedule_name(name), define))[1]

    async def pause_schedule(self, name: str, *, actor: Actor | None = None) -> Schedule:
        """Stop firing (occurrences made ahead of time are withdrawn) until resumed."""
        schedule = await self.update_schedule(name, active=False)
        await self._audit(actor, "schedule_pause", {"schedule": schedule.name})
        return schedule

    async def resume_schedule(self, name: str, *, actor: Actor | None = None) -> Schedule:
        """Fire again from the next occurrence after now (the paused time is not caught up)."""
        schedule = await self.update_schedule(name, active=True)
        await self._audit(actor, "schedule_resume", {"schedule": schedule.name})
        return schedule

    async def delete_schedule(
        self, name: str, *, actor: Actor | None = None
    ) -> tuple[Schedule, int]:
        """Delete a schedule; its pending occurrences are cancelled (how many is returned)."""
        await self.open()
        deleted = await self.schedules.delete_schedule(
            self.namespace, check_schedule_name(name), self.clock.now()
        )
        if deleted is None:
            raise self._missing(name)
        target = {"schedule": deleted[0].name, "cancelled": deleted[1]}
        await self._audit(actor, "schedule_delete", target)
        return deleted

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
    ) -> list[datetime]:
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
        stored = await self.get_schedule(schedule) if schedule is not None else None
        return preview_occurrences(
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
            now=self.clock.now(),
            rrule=rrule,
            calendar=calendar,
        )

    def _missing(self, name: str) -> NotFound:
        return NotFound(f"no schedule named {name!r} in namespace {self.namespace!r}", field="name")

    async def _revise(
        self, name: str, define: Callable[[Schedule], ScheduleRequest]
    ) -> tuple[bool, Schedule]:
        """Read, revise and write with a version check; again if someone changed it meanwhile."""
        for _ in range(_REVISE_TRIES):
            current = await self.get_schedule(name)
            now = self.clock.now()
            revision = revise(
                current,
                define(current),
                now,
                self.settings.max_attempts,
                self.settings.max_payload_bytes,
            )
            if not revision.changed:
                return False, current
            saved = await self.schedules.save_schedule(
                revision.schedule, now, revision.release_after
            )
            if saved is not None:
                return True, saved
        raise Conflict(f"schedule {name!r} kept changing; try again", field="name")

    async def tzdata_diff(self, zoneinfo: str, *, count: int = 5) -> list[ZoneMove]:
        """What the tz rules compiled in the folder ``zoneinfo`` would move: every pending
        local-form timer and each schedule's next ``count`` occurrences (all namespaces: tz data
        is the installation's). Nothing is changed."""
        from duetime.services.tzdata_diff import tzdata_diff

        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= 1000:
            raise InvalidInput("count", "must be a whole number from 1 to 1000")
        await self.open()
        return await tzdata_diff(self.schedules, zoneinfo, self.clock.now(), count)

    def materializer(self, **options: Any) -> Materializer:
        """A schedule materialiser for this app's namespace (``tick()`` or ``run(stop)``)."""
        from duetime.services.materializer import Materializer

        return Materializer(self.store, self.clock, self.namespace, **options)
