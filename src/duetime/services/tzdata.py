"""tz database changes: keep "09:00 local" at 09:00 local when a zone gets new rules.

The database records the tz data release it was last resolved with (``meta`` key
``tzdata_version``). When a worker starts with another release, every pending local-form timer
(``Timer.local`` + ``timezone``) gets its ``due_at`` recomputed from its wall-clock time
(:func:`duetime.when.reresolve`), and every cron schedule its ``next_at`` (from ``after_at``,
under the new rules). Doing it twice is harmless: the same rules give the same instants.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from duetime import tzmath
from duetime.errors import InvalidInput
from duetime.model import Timer
from duetime.recurrence import next_after
from duetime.schedules import ScheduleAdvance, recurrence_of
from duetime.store.parts import ScheduleStore
from duetime.when import When, reresolve

log = logging.getLogger("duetime.tzdata")

META_KEY = "tzdata_version"
PAGE = 500


@dataclass(frozen=True, slots=True)
class TzdataReport:
    """What a start-up check found and did."""

    previous: str | None
    current: str
    timers: int = 0
    """Pending local-form timers whose due time moved."""
    schedules: int = 0
    """Schedules whose next occurrence moved."""

    @property
    def changed(self) -> bool:
        return self.previous != self.current


async def reresolve_if_changed(
    store: ScheduleStore, now: datetime, *, version: str | None = None
) -> TzdataReport:
    """Re-resolve everything if the installed tz data differs from the recorded release."""
    current = tzmath.tzdata_version() if version is None else version
    previous = await store.get_meta(META_KEY)
    if previous == current:
        return TzdataReport(previous, current)
    timers = await reresolve_local_timers(store, now)
    schedules = await reresolve_schedules(store, now)
    await store.set_meta(META_KEY, current, now)
    if timers or schedules:
        log.warning(
            "tz data %s -> %s: moved %d local-form timers and %d schedules to the new rules",
            previous,
            current,
            timers,
            schedules,
        )
    return TzdataReport(previous, current, timers, schedules)


async def reresolve_local_timers(store: ScheduleStore, now: datetime) -> int:
    """Recompute ``due_at`` of every pending local-form timer; how many moved."""
    moved = 0
    after_id = 0
    while True:
        page = await store.pending_local_timers(after_id, PAGE)
        if not page:
            return moved
        after_id = page[-1].id
        changes = []
        for timer in page:
            due_at = _reresolved(timer)
            if due_at is not None and due_at != timer.due_at:
                changes.append((timer.id, timer.due_at, due_at))
        if changes:
            moved += await store.reresolve_timers(changes, now)


def _reresolved(timer: Timer) -> datetime | None:
    when = When(timer.due_at, timer.local, timer.timezone, timer.disambiguation)
    try:
        return reresolve(when).due_at
    except InvalidInput as exc:  # e.g. 'reject' and the time now falls in a new gap
        log.warning("timer %s keeps its due time: %s", timer.key, exc.message)
        return None


async def reresolve_schedules(store: ScheduleStore, now: datetime) -> int:
    """Recompute ``next_at`` of every cron schedule under the current rules; how many moved."""
    moved = 0
    after_id = 0
    while True:
        page = await store.schedules_after(after_id, PAGE)
        if not page:
            return moved
        after_id = page[-1].id
        advances = []
        for schedule in page:
            try:
                next_at = next_after(recurrence_of(schedule), schedule.after_at)
            except InvalidInput as exc:  # the zone itself was removed from the tz data
                log.warning("schedule %s keeps its next occurrence: %s", schedule.name, exc)
                continue
            if next_at != schedule.next_at:
                advances.append(
                    ScheduleAdvance(
                        schedule.id,
                        schedule.version,
                        next_at,
                        schedule.after_at,
                        schedule.last_at,
                    )
                )
        if advances:
            moved += len(await store.advance_schedules(advances, now))
