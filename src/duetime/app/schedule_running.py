"""Running a schedule's next occurrence now: that occurrence's timer (its usual key) is created
and the schedule advanced past it in one transaction, then the timer is made due, so the
occurrence runs once and the schedule goes on from the one after."""

from __future__ import annotations

from datetime import timedelta

from duetime.app.audit import Audit
from duetime.app.schedule_reading import ScheduleReads
from duetime.errors import Conflict
from duetime.model import HELD_AT, Timer
from duetime.model.audit import Actor


class NextOccurrenceNow:
    """One schedule's next occurrence, run now (``app.schedules.run_next_now``)."""

    def __init__(self, reads: ScheduleReads, audit: Audit) -> None:
        self._reads = reads
        self._audit = audit

    async def run(self, name: str, *, actor: Actor | None = None) -> Timer:
        """Run the schedule's next occurrence now: its timer (key ``schedule:<name>:<instant>``)
        is created and the schedule advanced past it in one transaction, then made due; when
        its instant comes, nothing more fires. Conflict when paused or ended."""
        from duetime.services.materializer import plan_advance

        context = self._reads._context
        for _ in range(5):
            schedule = await self._reads.get(name)
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
            moved = await context.store.schedules.advance_schedules([advance], context.clock.now())
            if moved:
                key = advance.timers[0].key
                now = context.clock.now()
                timer = await context.store.run_now(context.namespace, key, now)
                target = {"schedule": name, "key": timer.key}
                await self._audit.note(actor, "schedule_run_next", target)
                return timer
        raise Conflict(f"schedule {name!r} kept changing; try again", field="name")
