"""Planning the schedules the SQL functions wrote: what PostgreSQL cannot do as duetime does.

``add_schedule(...)`` and the rest change the schedules table in the caller's transaction
(migration 0031) and answer there (created, updated, kept, paused, resumed, removed). What
needs duetime's own rules -- what a cron or RRULE means, the zone's tz data, the first
occurrence -- they leave to a worker: the row's ``next_at`` is held (``HELD_AT``, beyond every
horizon the materialiser reaches) and a request records the change. :func:`plan_change` then
checks the row with the Python API's checks and sets its next occurrence. A row that fails is
never lost: it goes back to the definition it had before the change (one that had none, a new
schedule, is paused with nothing due), and the request records the reason.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from datetime import datetime

from duetime.config import Settings
from duetime.errors import DuetimeError
from duetime.model import HELD_AT, Schedule
from duetime.model.sql_requests import ScheduleChange
from duetime.schedules import ScheduleRequest, first_after, recurrence_of
from duetime.store.parts import ScheduleStore, SqlAccessStore
from duetime.support.cpu_work import run_cpu_work

SUPERSEDED = "; superseded by a later change"


def planned(schedule: Schedule, settings: Settings, now: datetime, ended: bool) -> Schedule:
    """``schedule`` checked as ``Schedules.add`` checks a definition (``ended``: an end in the
    past is allowed, as for a change), with its next occurrence; DuetimeError naming the field
    when it is refused."""
    ScheduleRequest.of(schedule).resolve(
        schedule.namespace,
        now,
        settings.max_attempts,
        settings.max_payload_bytes,
        allow_ended=ended,
    )
    following = first_after(recurrence_of(schedule), schedule.anchor_at, schedule.after_at)
    return replace(schedule, next_at=following)


def restored(previous: Schedule, current: Schedule) -> Schedule:
    """``previous`` (as last planned) written over ``current``: the occurrences the change
    released are made again, as far back as either had handled them."""
    after_at = min(previous.after_at, current.after_at)
    back = replace(
        previous,
        id=current.id,
        version=current.version,
        created_at=current.created_at,
        after_at=after_at,
    )
    return replace(back, next_at=first_after(recurrence_of(back), back.anchor_at, after_at))


async def plan_change(
    change: ScheduleChange,
    schedules: ScheduleStore,
    access: SqlAccessStore,
    settings: Settings,
    now: datetime,
) -> tuple[str, bool]:
    """Check and plan the schedule ``change`` wrote; the request's outcome and whether it
    failed."""
    answered = change.outcome or change.action
    current = await schedules.get_schedule(change.namespace, change.name)
    if current is None or current.version != change.schedule_version:
        return answered + SUPERSEDED, False
    if current.next_at != HELD_AT:  # pragma: no cover - only a held row is recorded pending
        return answered, False
    previous = await access.previous_schedule(change.id)
    try:
        plan = functools.partial(planned, current, settings, now, previous is not None)
        saved = await schedules.save_schedule(await run_cpu_work(plan), now, None)
        return (answered if saved is not None else answered + SUPERSEDED), False
    except DuetimeError as exc:
        reason = str(exc)
    except (ValueError, OverflowError) as exc:  # no field to blame: still never lost
        reason = f"{change.name}: duetime could not plan it ({exc})"
    if previous is not None:
        fallback = restored(previous, current)
        kept = "; the schedule keeps its previous definition"
    else:
        fallback = replace(current, active=False, next_at=None)
        kept = "; the schedule is paused, with nothing due"
    saved = await schedules.save_schedule(fallback, now, None)
    return reason + (kept if saved is not None else SUPERSEDED), True
