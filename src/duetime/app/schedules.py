"""The schedules part of an app (``app.schedules``): add, change, pause, resume, delete, and
run one's next occurrence now.

:class:`Schedules` reads through :class:`~duetime.app.schedule_reading.ScheduleReads` and
writes its operator actions to the app's :class:`~duetime.app.audit.Audit`. Running a schedule's
next occurrence now creates that occurrence's timer (its usual key) and advances the schedule past
it in one transaction, then makes the timer due: the occurrence runs once, and the schedule goes on
from the one after.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from datetime import date, datetime, timedelta
from typing import Any

from duetime.app.audit import Audit
from duetime.app.context import AppContext
from duetime.app.deprecation import warn_moved
from duetime.app.schedule_reading import ScheduleReads
from duetime.errors import Conflict, InvalidInput
from duetime.model import HELD_AT, JSON, OnConflict, Schedule, Timer
from duetime.model.audit import Actor, keys_target
from duetime.model.schedules import NewSchedule
from duetime.revisions import revise
from duetime.schedules import (
    UNSET,
    RuleCache,
    ScheduleAction,
    ScheduleRequest,
    Unset,
    check_schedule_name,
    prepare_rules,
)
from duetime.store.room import ScheduleRoom
from duetime.support.cpu_work import run_cpu_work
from duetime.timemath.recurrence.calendar import CALENDAR_FIELDS
from duetime.timemath.recurrence.overlap import DEFAULT_CATCH_UP_GRACE
from duetime.validation import check_on_conflict

_REVISE_TRIES = 20
_NOT_FIELDS = ("self", "name", "actor", "on_conflict")
"""Parameters of :meth:`Schedules.add` and :meth:`Schedules.update` that are no field."""


class Schedules(ScheduleReads):
    """Schedules are data: each occurrence becomes an ordinary timer (see docs/schedules.md)."""

    def __init__(self, context: AppContext, audit: Audit) -> None:
        super().__init__(context)
        self._audit = audit

    def __getattr__(self, name: str) -> Any:
        """Deprecated: ``app.schedules`` was the store's schedules part; what this part lacks
        is still read from that one (``app.store.schedules``), with a warning saying so."""
        if name.startswith("_"):
            raise AttributeError(name)
        found = getattr(self._context.store.schedules, name)
        warn_moved(f"schedules.{name}", f"store.schedules.{name}", stacklevel=2)
        return found

    async def add(
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
        actor: Actor | None = None,
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
        (``skip`` | ``forward`` | ``backward`` | ``modified_forward`` |
        ``modified_backward``) keep it on business days; ``feb29`` says what
        a yearly rule on 29 February does in common years (see docs/schedules.md).
        """
        given = dict(locals())  # every parameter, first thing
        fields = {k: v for k, v in given.items() if k not in _NOT_FIELDS}
        fields["active"] = True if active is None else active
        request = ScheduleRequest(name=name, **fields)
        (result,) = await self.add_many(
            [request], on_conflict=on_conflict, keep_active=active is None, actor=actor
        )
        return result

    async def add_many(
        self,
        requests: Iterable[ScheduleRequest],
        *,
        on_conflict: OnConflict = "update",
        keep_active: bool = False,
        actor: Actor | None = None,
    ) -> list[tuple[ScheduleAction, Schedule]]:
        """Create many schedules in one transaction (all or, on bad input, none); see
        :meth:`add`. Each is validated as the store reads it, so the store can send the first
        while the rest are still being validated. One audit entry (``schedule_define``) names
        the schedules created or updated; one that was kept as it was is not counted."""
        check_on_conflict(on_conflict)
        requests = list(requests)
        context = self._context
        now = context.clock.now()
        rules: RuleCache = {}
        await run_cpu_work(functools.partial(prepare_rules, requests, now, rules))
        news: Iterable[NewSchedule] = self._resolve_schedules(requests, now, rules)
        if not context.opened:  # opening creates the namespace: not for a batch that is refused
            news = list(news)
        await context.open()
        stored = await self._stored.put_schedules(
            news, on_conflict, now, self._schedule_room(requests)
        )
        results: list[tuple[ScheduleAction, Schedule]] = []
        for request, row in zip(requests, stored, strict=True):
            if row is not None:
                results.append(("created", row))
                continue
            if on_conflict == "keep":
                results.append(("kept", await self.get(request.name)))
                continue

            def define(current: Schedule, request: ScheduleRequest = request) -> ScheduleRequest:
                return replace(request, active=current.active) if keep_active else request

            changed, schedule = await self._revise(request.name, define)
            results.append(("updated" if changed else "kept", schedule))
        await self._audit_defined(actor, results)
        return results

    async def _audit_defined(
        self, actor: Actor | None, results: Sequence[tuple[ScheduleAction, Schedule]]
    ) -> None:
        done = [(action, schedule) for action, schedule in results if action != "kept"]
        if not done:
            return
        target: dict[str, JSON]
        if len(results) == 1:
            target = {"schedule": done[0][1].name, "outcome": done[0][0]}
        else:
            target = {"schedules": keys_target([schedule.name for _, schedule in done])}
        await self._audit.note(actor, "schedule_define", target, len(done))

    def _resolve_schedules(
        self, requests: list[ScheduleRequest], now: datetime, rules: RuleCache
    ) -> Iterator[NewSchedule]:
        """Each request validated as it is read; a bad one raises InvalidInput naming its
        field, behind its index (``[3].cron``) unless it is the only request. ``rules`` holds
        the rules :func:`~duetime.schedules.prepare_rules` checked beforehand."""
        namespace, settings = self._context.namespace, self._context.settings
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
        return ScheduleRoom(self._context.namespace, names, self._context.settings.max_schedules)

    async def update(
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
        actor: Actor | None = None,
    ) -> Schedule:
        """Change some fields (None clears an optional one); the next occurrence is recomputed.

        Giving ``cron``, ``every`` or ``rrule`` switches the schedule to that kind of rule. The
        audit log (``schedule_change``) names the fields given, when the schedule changed.
        """
        given = dict(locals())  # every parameter, first thing
        changes: dict[str, Any] = {
            k: v for k, v in given.items() if k not in _NOT_FIELDS and v is not UNSET
        }
        fields = sorted(changes)
        changed, schedule = await self._change(name, changes)
        if changed:
            target: dict[str, JSON] = {"schedule": schedule.name, "fields": list(fields)}
            await self._audit.note(actor, "schedule_change", target)
        return schedule

    async def _change(self, name: str, changes: dict[str, Any]) -> tuple[bool, Schedule]:
        """Apply ``changes`` (fields given; None clears); whether anything changed."""
        kinds = ("cron", "every", "rrule")
        for kind in kinds:
            if changes.get(kind) is not None:
                for other in kinds:
                    changes.setdefault(other, None)
        if changes.get("rrule", UNSET) is None:  # no longer a calendar rule
            changes.update(dict.fromkeys(CALENDAR_FIELDS[1:]), feb29="feb28")

        def define(current: Schedule) -> ScheduleRequest:
            return replace(ScheduleRequest.of(current), **changes)

        await self._context.open()
        return await self._revise(check_schedule_name(name), define)

    async def pause(self, name: str, *, actor: Actor | None = None) -> Schedule:
        """Stop firing (occurrences made ahead of time are withdrawn) until resumed; pausing a
        paused schedule changes nothing and is not written to the audit log."""
        changed, schedule = await self._change(name, {"active": False})
        if changed:
            await self._audit.note(actor, "schedule_pause", {"schedule": schedule.name})
        return schedule

    async def resume(self, name: str, *, actor: Actor | None = None) -> Schedule:
        """Fire again from the next occurrence after now (the paused time is not caught up)."""
        changed, schedule = await self._change(name, {"active": True})
        if changed:
            await self._audit.note(actor, "schedule_resume", {"schedule": schedule.name})
        return schedule

    async def delete(self, name: str, *, actor: Actor | None = None) -> tuple[Schedule, int]:
        """Delete a schedule; its pending occurrences are cancelled (how many is returned)."""
        context = self._context
        await context.open()
        deleted = await self._stored.delete_schedule(
            context.namespace, check_schedule_name(name), context.clock.now()
        )
        if deleted is None:
            raise self._missing(name)
        target = {"schedule": deleted[0].name, "cancelled": deleted[1]}
        await self._audit.note(actor, "schedule_delete", target)
        return deleted

    async def _revise(
        self, name: str, define: Callable[[Schedule], ScheduleRequest]
    ) -> tuple[bool, Schedule]:
        """Read, revise and write with a version check; again if someone changed it meanwhile."""
        for _ in range(_REVISE_TRIES):
            current = await self.get(name)
            now = self._context.clock.now()
            settings = self._context.settings
            # Checking the rule and finding its occurrences is CPU work: off the event loop.
            revision = await run_cpu_work(
                functools.partial(
                    revise,
                    current,
                    define(current),
                    now,
                    settings.max_attempts,
                    settings.max_payload_bytes,
                )
            )
            if not revision.changed:
                return False, current
            saved = await self._stored.save_schedule(revision.schedule, now, revision.release_after)
            if saved is not None:
                return True, saved
        raise Conflict(f"schedule {name!r} kept changing; try again", field="name")

    async def run_next_now(self, name: str, *, actor: Actor | None = None) -> Timer:
        """Run the schedule's next occurrence now: its timer (key ``schedule:<name>:<instant>``)
        is created and the schedule advanced past it in one transaction, then made due; when
        its instant comes, nothing more fires. Conflict when paused or ended."""
        from duetime.services.materializer import plan_advance

        context = self._context
        for _ in range(5):
            schedule = await self.get(name)
            upcoming = schedule.next_at
            if not schedule.active:
                raise Conflict(f"schedule {name!r} is paused: resume it first", field="name")
            if upcoming is None:
                raise Conflict(f"schedule {name!r} has no next occurrence (ended)", field="name")
            if upcoming == HELD_AT:  # written from SQL, its rule not yet checked by a worker
                raise Conflict(f"schedule {name!r} is being planned; try again", field="name")
            advance = plan_advance(schedule, upcoming, lookahead=timedelta(0), per_schedule=1)
            if not advance.timers:  # pragma: no cover - next_at is always planned at itself
                raise Conflict(f"schedule {name!r} has nothing to run", field="name")
            moved = await self._stored.advance_schedules([advance], context.clock.now())
            if moved:
                key = advance.timers[0].key
                now = context.clock.now()
                timer = await context.store.run_now(context.namespace, key, now)
                target = {"schedule": name, "key": timer.key}
                await self._audit.note(actor, "schedule_run_next", target)
                return timer
        raise Conflict(f"schedule {name!r} kept changing; try again", field="name")
