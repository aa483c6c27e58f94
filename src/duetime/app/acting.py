"""The operator's acting part of the facade: edit a pending timer's due time or payload, and
run a schedule's next occurrence now.

:class:`ActingMethods` is mixed into :class:`duetime.app.facade.AsyncApp`. An edit is a re-schedule
of
the same key with ``on_conflict="update"`` (the timer's other fields carried over), so it obeys
exactly the rules a client's re-schedule does. Running a schedule's next occurrence now creates
that occurrence's timer (its usual key) and advances the schedule past it in one transaction,
then makes the timer due: the occurrence runs once, and the schedule goes on from the one after.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from duetime.clock import Clock
from duetime.errors import Conflict, InvalidInput
from duetime.model import OnConflict, PutResult, Schedule, Timer
from duetime.requests import TimerRequest
from duetime.store import Store

if TYPE_CHECKING:
    from duetime.config import Settings

WHEN_FIELDS = ("at", "delay", "local", "date", "timezone", "disambiguation")
EDIT_FIELDS = (*WHEN_FIELDS, "payload")


class ActingMethods:
    """Edit a timer, run a schedule's next occurrence now."""

    store: Store
    clock: Clock
    namespace: str
    settings: Settings

    if TYPE_CHECKING:

        async def open(self, *, create_namespace: bool | None = None) -> object: ...

        async def get(self, key: str) -> Timer: ...

        async def run_now(self, key: str) -> Timer: ...

        async def get_schedule(self, name: str) -> Schedule: ...

        async def schedule_many(
            self,
            requests: Iterable[TimerRequest],
            *,
            on_conflict: OnConflict = "update",
            transaction: object | None = None,
        ) -> list[PutResult]: ...

    async def edit(self, key: str, changes: Mapping[str, Any]) -> Timer:
        """Change a scheduled or retrying timer's due time (``at``, ``delay``, ``local`` or
        ``date``, with ``timezone``) and/or ``payload``; Conflict once it has fired.

        The rest of the timer is carried over, and the request goes through the re-schedule
        path (``on_conflict="update"``): validated as any schedule call, and a timer that
        fired meanwhile is kept as it is (Conflict)."""
        for name in changes:
            if name not in EDIT_FIELDS:
                raise InvalidInput(name, f"is not a field one can edit ({', '.join(EDIT_FIELDS)})")
        if not changes:
            raise InvalidInput("body", "name a new due time (at, delay, local, date) or payload")
        timer = await self.get(key)
        if not timer.status.is_pending:
            raise Conflict(f"timer {key!r} is {timer.status.value}: only a pending one is edited")
        if timer.destination is not None:
            raise Conflict(f"timer {key!r} is a delivery of an event: edit the event instead")
        request = TimerRequest.from_dict({**_carried(timer, changes), **changes})
        (result,) = await self.schedule_many([request], on_conflict="update")
        if result.action == "kept" and not result.timer.status.is_pending:
            raise Conflict(f"timer {key!r} fired meanwhile ({result.timer.status.value})")
        return result.timer

    async def run_next_now(self, name: str) -> Timer:
        """Run the schedule's next occurrence now: its timer (key ``schedule:<name>:<instant>``)
        is created and the schedule advanced past it in one transaction, then made due; when
        its instant comes, nothing more fires. Conflict when paused or ended."""
        from duetime.services.materializer import plan_advance

        for _ in range(5):
            schedule = await self.get_schedule(name)
            upcoming = schedule.next_at
            if not schedule.active:
                raise Conflict(f"schedule {name!r} is paused: resume it first", field="name")
            if upcoming is None:
                raise Conflict(f"schedule {name!r} has no next occurrence (ended)", field="name")
            advance = plan_advance(schedule, upcoming, lookahead=timedelta(0), per_schedule=1)
            if not advance.timers:  # pragma: no cover - next_at is always planned at itself
                raise Conflict(f"schedule {name!r} has nothing to run", field="name")
            moved = await self.store.schedules.advance_schedules([advance], self.clock.now())
            if moved:
                return await self.run_now(advance.timers[0].key)
        raise Conflict(f"schedule {name!r} kept changing; try again", field="name")


def _carried(timer: Timer, changes: Mapping[str, Any]) -> dict[str, Any]:
    """The timer as a schedule request: every field it has, its due time unless changed."""
    carried: dict[str, Any] = {
        "type": timer.type,
        "key": timer.key,
        "payload": timer.payload,
        "subject": timer.subject,
        "correlation_id": timer.correlation_id,
        "max_attempts": timer.max_attempts,
        "priority": timer.priority,
    }
    if timer.expires_after is not None:
        carried["expires_after"] = timer.expires_after.total_seconds()
    if not any(name in changes for name in ("at", "delay", "local", "date")):
        if timer.local is not None:
            carried["local"] = timer.local.replace(tzinfo=None).isoformat()
            carried["timezone"] = timer.timezone
            carried["disambiguation"] = timer.disambiguation
        else:
            carried["at"] = timer.due_at.isoformat()
    return carried
