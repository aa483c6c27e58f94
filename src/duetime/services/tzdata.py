"""tz database changes: keep "09:00 local" at 09:00 local when a zone gets new rules.

The database records the tz data release it was last resolved with (``meta`` key
``tzdata_version``). When a worker starts with another release, every pending local-form timer
(``Timer.local`` + ``timezone``) gets its ``due_at`` recomputed from its wall-clock time, each
move recorded in the timer's history (:mod:`duetime.model.moves`), and every schedule its
``next_at`` (from ``after_at``, under the new rules). Doing it twice is harmless: the same rules
give the same instants. The rules may also come from a compiled zoneinfo tree (``zones``), which
is how a release is tried before it is installed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from duetime.errors import InvalidInput
from duetime.model import Timer
from duetime.schedules import ScheduleAdvance, recurrence_of
from duetime.store.parts import ScheduleStore
from duetime.timemath import tzmath
from duetime.timemath.recurrence import Recurrence, next_after
from duetime.timemath.tzmath import parse_disambiguation, stored_zone, to_utc

Zones = Callable[[str], ZoneInfo | None]
"""Where zone rules come from by name: the installed tz data (``stored_zone``), or a compiled
zoneinfo tree (:class:`duetime.services.tzdata_diff.ZoneTree`); None: not there."""

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
    store: ScheduleStore, now: datetime, *, version: str | None = None, zones: Zones | None = None
) -> TzdataReport:
    """Re-resolve everything if the tz data (``zones``, by default the installed release)
    differs from the recorded release; each timer's move is recorded in its history."""
    current = tzmath.tzdata_version() if version is None else version
    previous = await store.get_meta(META_KEY)
    if previous == current:
        return TzdataReport(previous, current)
    zones = zones or stored_zone
    reason = f"tz data {previous or 'unrecorded'} -> {current}"
    timers = await reresolve_local_timers(store, now, zones, reason)
    schedules = await reresolve_schedules(store, now, zones)
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


async def reresolve_local_timers(
    store: ScheduleStore, now: datetime, zones: Zones = stored_zone, reason: str = "tz data"
) -> int:
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
            due_at = _reresolved(timer, zones)
            if due_at is not None and due_at != timer.due_at:
                changes.append((timer.id, timer.due_at, due_at))
        if changes:
            moved += await store.reresolve_timers(changes, now, reason)


def _reresolved(timer: Timer, zones: Zones) -> datetime | None:
    """The timer's instant under ``zones``' rules, its wall time kept (None: left as it is)."""
    if timer.local is None or timer.timezone is None:
        return None
    try:
        zone = zones(timer.timezone)
        if zone is None:
            raise InvalidInput("timezone", f"{timer.timezone!r} is not in the new tz data")
        choice = parse_disambiguation(timer.disambiguation)
        return to_utc(timer.local, zone, choice, "local")
    except InvalidInput as exc:  # e.g. 'reject' and the time now falls in a new gap
        log.warning("timer %s keeps its due time: %s", timer.key, exc.message)
        return None


async def reresolve_schedules(
    store: ScheduleStore, now: datetime, zones: Zones = stored_zone
) -> int:
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
                next_at = _next_under(
                    recurrence_of(schedule), schedule.timezone, zones, schedule.after_at
                )
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


def _next_under(rule: Recurrence, timezone: str, zones: Zones, after: datetime) -> datetime | None:
    """The rule's first occurrence after ``after`` with ``zones``' rules for its zone."""
    if rule.every is not None:  # real elapsed time: no zone
        return next_after(rule, after)
    zone = zones(timezone)
    if zone is None:
        raise InvalidInput("timezone", f"{timezone!r} is not in the new tz data")
    return next_after(rule, after, zone=zone)
