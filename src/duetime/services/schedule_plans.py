"""Planning a due schedule's advance, pure: the timers it needs now (catch-up and overlap
policies applied) and where it goes next; and what planning remembers across a round's batches.

The materialiser (:mod:`duetime.services.materializer`) writes what is planned here.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, cast

from duetime.errors import RuleTooCostly
from duetime.model import Schedule, iso
from duetime.model.schedules import DueSchedule, Occurrence, OccurrenceState
from duetime.schedules import KEY_PREFIX, ScheduleAdvance, recurrence_of
from duetime.timemath.recurrence import CatchUpPolicy, Recurrence, catch_up_due, next_after
from duetime.timemath.recurrence.overlap import decide, gated, parse_overlap

log = logging.getLogger("duetime.materializer")
"""The materialiser's log: a schedule stopped by planning is the materialiser's news."""

LOOKAHEAD = timedelta(seconds=5)
PER_SCHEDULE = 100
REMEMBERED = 10_000
"""Entries a round's PlanCache holds at most (rules, next occurrences, formatted instants)."""
_TINY = timedelta(microseconds=1)
NOTHING_UNFINISHED = OccurrenceState()

Planned = Schedule | DueSchedule
"""A schedule as planning reads it: a stored one, or the narrow row the stores read when due."""


Shape = tuple[tuple[datetime, ...], datetime | None, datetime, datetime | None]
"""A plan without the schedule it is for: the instants that fire, next_at, after_at, last_at."""


class PlanCache:
    """What planning remembers across the batches of one round: a million schedules share a
    few rules, and those due together mostly share their next occurrence too (per-user
    schedules). A backlog walked in windows of ids (:mod:`duetime.services.windows`) meets
    every rule in every batch. Bounded: past :data:`REMEMBERED` entries it starts afresh
    (schedules of rules all their own: a cache of a million would only cost memory)."""

    __slots__ = ("costly", "isos", "nexts", "rules", "shapes")

    def __init__(self) -> None:
        self.rules: dict[tuple[object, ...], Recurrence] = {}
        self.nexts: dict[tuple[Recurrence, datetime], datetime | None] = {}
        self.isos: dict[datetime, str] = {}
        self.shapes: dict[tuple[object, ...], Shape] = {}
        self.costly: dict[tuple[object, ...], RuleTooCostly] = {}
        """Plans that ran out of expansion budget, by shape: not tried twice in a round."""

    def bound(self) -> None:
        """Forget everything once any part holds more than :data:`REMEMBERED` entries."""
        parts: tuple[dict[Any, Any], ...] = (
            self.rules,
            self.nexts,
            self.isos,
            self.shapes,
            self.costly,
        )
        if max(map(len, parts)) > REMEMBERED:
            for part in parts:
                part.clear()

    def rule(self, schedule: Planned) -> Recurrence:
        """The schedule's :class:`Recurrence`, made once per distinct rule."""
        start = schedule.start_at
        if start is None and schedule.every is not None:
            start = schedule.anchor_at
        key = (
            schedule.cron,
            schedule.every,
            schedule.timezone,
            schedule.on_gap,
            schedule.on_overlap,
            start,
            schedule.end_at,
            schedule.calendar,
        )
        try:
            return self.rules[key]
        except KeyError:
            rule = self.rules[key] = recurrence_of(schedule)
            return rule

    def next(self, rule: Recurrence, after: datetime) -> datetime | None:
        """next_after, remembered."""
        key = (rule, after)
        try:
            return self.nexts[key]
        except KeyError:
            found = self.nexts[key] = next_after(rule, after)
            return found

    def key(self, name: str, instant: datetime) -> str:
        """occurrence_key, with the instant formatted once per batch."""
        try:
            text = self.isos[instant]
        except KeyError:
            text = self.isos[instant] = str(iso(instant))
        return f"{KEY_PREFIX}{name}:{text}"


def plan_advance(
    schedule: Planned,
    now: datetime,
    *,
    lookahead: timedelta = LOOKAHEAD,
    per_schedule: int = PER_SCHEDULE,
    cache: PlanCache | None = None,
    state: OccurrenceState = NOTHING_UNFINISHED,
) -> ScheduleAdvance:
    """Pure: the timers one due schedule needs now, and where it goes next.

    ``state``: whether an earlier occurrence is unfinished, or buffered (schedules with an
    overlap policy only).
    """
    cache = PlanCache() if cache is None else cache
    rule = cache.rule(schedule)
    horizon = now + lookahead
    upcoming = schedule.next_at
    after_at = schedule.after_at
    fire: list[datetime] = []
    if upcoming is not None and upcoming <= now - schedule.catch_up_grace:
        # An outage: the schedule's catch-up policy decides about everything overdue.
        missed, upcoming = catch_up_due(
            rule, upcoming - _TINY, now, cast(CatchUpPolicy, schedule.catch_up), per_schedule
        )
        fire = missed
        after_at = now
        if upcoming is not None and upcoming <= now:  # `all`, capped: go on next batch
            after_at = missed[-1]
            return _advance(schedule, fire, upcoming, after_at, state, cache, now)
    while upcoming is not None and upcoming <= horizon and len(fire) < per_schedule:
        fire.append(upcoming)
        after_at = upcoming
        upcoming = cache.next(rule, upcoming)
    return _advance(schedule, fire, upcoming, after_at, state, cache, now)


def shape_key(schedule: Planned, now: datetime) -> tuple[object, ...]:
    """What a plan depends on besides its schedule's name and occurrence states."""
    return (
        now,
        schedule.cron,
        schedule.every,
        schedule.timezone,
        schedule.start_at,
        schedule.end_at,
        schedule.on_gap,
        schedule.on_overlap,
        None if schedule.every is None else schedule.anchor_at,  # a cron's is not read
        schedule.catch_up,
        schedule.catch_up_grace,
        schedule.next_at,
        schedule.after_at,
        schedule.last_at,
        schedule.calendar,
    )


def stopped(schedule: Planned, reason: RuleTooCostly) -> ScheduleAdvance:
    """A schedule whose rule ran out of expansion budget (written before the budget existed,
    or costlier from where it now stands): it gets no next occurrence, so it stops instead
    of holding every round; its rule and its timers stay as they are, and changing the rule
    starts it again."""
    log.warning(
        "schedule %r stopped: its rule is too costly to expand (%s)", schedule.name, reason.message
    )
    return ScheduleAdvance(
        schedule.id, schedule.version, None, schedule.after_at, schedule.last_at, ()
    )


def due_by(instant: datetime | None, horizon: datetime) -> bool:
    return instant is not None and instant <= horizon


def _advance(
    schedule: Planned,
    fire: Sequence[datetime],
    next_at: datetime | None,
    after_at: datetime,
    state: OccurrenceState,
    cache: PlanCache,
    now: datetime,
) -> ScheduleAdvance:
    timers = tuple(Occurrence(cache.key(schedule.name, instant), instant) for instant in fire)
    last_at = fire[-1] if fire else schedule.last_at
    if not gated(schedule.overlap):
        return ScheduleAdvance(schedule.id, schedule.version, next_at, after_at, last_at, timers)
    policy = parse_overlap(schedule.overlap)
    return ScheduleAdvance(
        schedule_id=schedule.id,
        version=schedule.version,
        next_at=next_at,
        after_at=after_at,
        last_at=last_at,
        timers=timers,
        fates=tuple(decide(policy, fire, state.unfinished, state.buffered, now)),
        overlap=policy,
    )
