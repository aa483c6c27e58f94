"""tz database changes: keep "09:00 local" at 09:00 local when a zone gets new rules.

The database records the tz data release it was last resolved with (``meta`` key
``tzdata_version``). When a worker starts with another release, every pending local-form timer
(``Timer.local`` + ``timezone``) gets its ``due_at`` recomputed from its wall-clock time, each
move recorded in the timer's history (:mod:`duetime.model.moves`), and every schedule its
``next_at`` (from ``after_at``, under the new rules). The occurrence a schedule made last keeps
its place: its counterpart under the new rules (the nearest occurrence; a zone's offset moves an
occurrence by hours) does not come round again, and one made ahead that has not run is made
again at its new instant; one the new rules place in the past fires at once (it was not missed
while workers were down, so no catch-up policy may drop it). Doing it twice is harmless: the
same rules give the same instants. The rules may also come from a compiled zoneinfo tree
(``zones``), which is how a release is tried before it is installed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol
from zoneinfo import ZoneInfo

from duetime.errors import Conflict, InvalidInput, NotFound
from duetime.model import Schedule, Status, Timer
from duetime.schedules import ScheduleAdvance, occurrence_key, recurrence_of
from duetime.store.parts import ScheduleStore
from duetime.timemath import tzmath
from duetime.timemath.recurrence import Recurrence, iter_occurrences, next_after
from duetime.timemath.tzmath import parse_disambiguation, stored_zone, to_utc

Zones = Callable[[str], ZoneInfo | None]
"""Where zone rules come from by name: the installed tz data (``stored_zone``), or a compiled
zoneinfo tree (:class:`duetime.services.tzdata_diff.ZoneTree`); None: not there."""

log = logging.getLogger("duetime.tzdata")

META_KEY = "tzdata_version"
PAGE = 500
SHIFT = timedelta(days=1)
"""The most a new release moves an occurrence (Samoa skipped a whole day in 2011)."""
_TINY = timedelta(microseconds=1)


class Occurrences(Protocol):
    """What re-resolution reads and changes of the occurrences' timers."""

    async def get_timer(self, namespace: str, key: str) -> Timer | None: ...

    async def cancel(self, namespace: str, key: str, now: datetime) -> Timer: ...


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
    store: ScheduleStore,
    now: datetime,
    *,
    version: str | None = None,
    zones: Zones | None = None,
    timers: Occurrences | None = None,
) -> TzdataReport:
    """Re-resolve everything if the tz data (``zones``, by default the installed release)
    differs from the recorded release; each timer's move is recorded in its history.
    ``timers``: where an occurrence made ahead under the old rules is withdrawn (see
    :func:`reresolve_schedules`)."""
    current = tzmath.tzdata_version() if version is None else version
    previous = await store.get_meta(META_KEY)
    if previous == current:
        return TzdataReport(previous, current)
    zones = zones or stored_zone
    reason = f"tz data {previous or 'unrecorded'} -> {current}"
    moved = await reresolve_local_timers(store, now, zones, reason)
    schedules = await reresolve_schedules(store, now, zones, timers)
    await store.set_meta(META_KEY, current, now)
    if moved or schedules:
        log.warning(
            "tz data %s -> %s: moved %d local-form timers and %d schedules to the new rules",
            previous,
            current,
            moved,
            schedules,
        )
    return TzdataReport(previous, current, moved, schedules)


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
    store: ScheduleStore,
    now: datetime,
    zones: Zones = stored_zone,
    timers: Occurrences | None = None,
) -> int:
    """Recompute ``next_at`` of every cron schedule under the current rules; how many moved.

    The occurrence made last stays made: its counterpart under the new rules (the one nearest
    to it, see :func:`counterpart`) does not come round again. With ``timers``, one made ahead
    of time and not yet run is withdrawn and made again at its new instant."""
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
                next_at, after_at = await _position(schedule, zones, timers, now)
            except InvalidInput as exc:  # the zone itself was removed from the tz data
                log.warning("schedule %s keeps its next occurrence: %s", schedule.name, exc)
                continue
            if next_at != schedule.next_at:
                advances.append(
                    ScheduleAdvance(
                        schedule.id, schedule.version, next_at, after_at, schedule.last_at
                    )
                )
        if advances:
            moved += len(await store.advance_schedules(advances, now))


async def _position(
    schedule: Schedule, zones: Zones, timers: Occurrences | None, now: datetime
) -> tuple[datetime | None, datetime]:
    """The schedule's next occurrence under ``zones``' rules, and the instant it follows."""
    rule = recurrence_of(schedule)
    after = schedule.after_at
    made = schedule.last_at
    if rule.every is not None:  # real elapsed time: no zone
        return next_after(rule, after), after
    zone = _zone(zones, schedule.timezone)
    # The last occurrence made came from this very rule only if it was not changed since.
    same = None
    if made is not None and schedule.updated_at <= made:
        same = counterpart(rule, zone, made)
    if made is not None and same is not None and same != made:
        timer = None
        if timers is not None:
            timer = await timers.get_timer(schedule.namespace, occurrence_key(schedule.name, made))
        # Made ahead and not due yet: made again at its new instant (at once if that passed).
        if timers is not None and made > now and await _withdrawn(timers, timer, now):
            again = max(same, now)
            return again, min(after, again - _TINY)
        if not _cancelled_unrun(timer):  # it ran, or may yet: it does not come round again
            after = max(after, same)
    next_at = next_after(rule, after, zone=zone)
    if next_at is not None and next_at < now and schedule.next_at and next_at < schedule.next_at:
        # Moved into the past by the new rules, not missed while workers were down: no
        # catch-up policy may drop it. It fires at once, or stays as due as it already was.
        return min(schedule.next_at, now), after
    return next_at, after


def counterpart(rule: Recurrence, zone: ZoneInfo, made: datetime) -> datetime | None:
    """Which occurrence under ``zone``'s rules is the one made at ``made`` under others: the
    nearest within :data:`SHIFT` (a tie: the later). The rules know no wall time of ``made``,
    only that a zone's offset changes by hours, while the occurrences of a rule it moves are
    that far apart or more; one still at ``made`` is it (the common case, checked first)."""
    if next_after(rule, made - _TINY, zone=zone) == made:
        return made
    nearest: datetime | None = None
    for instant in iter_occurrences(rule, made - SHIFT, zone=zone):
        if instant > made + SHIFT:
            break
        if nearest is None or abs(instant - made) <= abs(nearest - made):
            nearest = instant
        if instant > made:
            break  # the first after `made`: nothing later is nearer
    return nearest


async def _withdrawn(timers: Occurrences, timer: Timer | None, now: datetime) -> bool:
    """Cancel the occurrence ``timer`` if it has not run yet (nor started, nor waits behind
    another under an overlap policy): True when it is withdrawn."""
    if timer is None or timer.status != Status.SCHEDULED or timer.attempts:
        return False
    if timer.run_at != timer.due_at:
        return False
    try:
        await timers.cancel(timer.namespace, timer.key, now)
    except (Conflict, NotFound):  # a worker took it meanwhile: it runs where it was
        return False
    log.warning("occurrence %s withdrawn: the new tz data places it elsewhere", timer.key)
    return True


def _cancelled_unrun(timer: Timer | None) -> bool:
    """Cancelled before it ran (withdrawn by another worker's re-resolution): not made."""
    return timer is not None and timer.status == Status.CANCELLED and not timer.attempts


def _zone(zones: Zones, timezone: str) -> ZoneInfo:
    zone = zones(timezone)
    if zone is None:
        raise InvalidInput("timezone", f"{timezone!r} is not in the new tz data")
    return zone
