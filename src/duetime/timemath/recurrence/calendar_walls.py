"""A calendar rule expanded: its wall times in order (the RRULE's, the RDATEs, rolled to business
days), and the UTC instants they fire at under the schedule's DST policy (see
:mod:`duetime.timemath.recurrence.calendar` for the rules it follows)."""

from __future__ import annotations

import functools
import heapq
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from dateutil import rrule as du

from duetime.timemath.recurrence.budget import (
    DROP_STEPS,
    RESOLVE_STEPS,
    WALL_STEPS,
    charge,
    metered,
)
from duetime.timemath.recurrence.business import (
    MAX_ROLL_DAYS,
    business_day,
    rolls_backward,
    rolls_forward,
)
from duetime.timemath.recurrence.calendar_record import Calendar, Feb29, rule_parts
from duetime.timemath.recurrence.cron import walk_start
from duetime.timemath.recurrence.day_filter import RULE_SEARCH_YEARS
from duetime.timemath.recurrence.periods import period_start, resumed, whole_first_period
from duetime.timemath.recurrence.rrule_text import RuleParts
from duetime.timemath.recurrence.skips import MAX_DROPPED
from duetime.timemath.tzmath import classify, to_utc


def drop_allowance(calendar: Calendar) -> int:
    """Steps an expansion of ``calendar`` is granted besides its budget for the occurrences
    ``roll=skip`` drops: MAX_DROPPED of them in a row (see
    :data:`~duetime.timemath.recurrence.budget.DROP_STEPS`); none without skip."""
    return MAX_DROPPED * DROP_STEPS if calendar.roll == "skip" else 0


def earliest_wall(calendar: Calendar) -> datetime:
    """No wall time of the calendar fires before this one: DTSTART or its first RDATE, less a
    month when a roll may move an occurrence to an earlier day (a backward roll of the first
    occurrence lands before DTSTART, and fires there)."""
    first = min((calendar.dtstart, *calendar.rdates[:1]))
    if rolls_backward(calendar.roll):
        try:
            return first - timedelta(days=MAX_ROLL_DAYS)
        except OverflowError:  # within a month of year 1: no earlier day to roll to
            return first
    return first


def rule_walls(calendar: Calendar, near: datetime | None = None) -> Iterator[datetime]:
    """The rule's own wall times in order (DTSTART's when it matches), COUNT applied; UNTIL
    only on the wall clock when it is not in UTC (UTC is compared with the instants).

    With ``near``, every wall time from ``near`` on and maybe some before it: the expansion
    starts at the rule's period that holds ``near`` when that is exact (see
    :mod:`duetime.timemath.recurrence.periods`), so a rule years old is as cheap to ask as a new
    one."""
    parts = calendar.parts
    until = parts.until
    wall_until: datetime | None = None
    if until is not None and not until.utc:
        wall_until = (
            until.value + timedelta(days=1) - timedelta(microseconds=1)
            if until.is_date
            else until.value
        )
    horizon = _years_later(max(calendar.dtstart, near or calendar.dtstart))
    for wall in _expanded(calendar, parts, near):
        if wall_until is not None and wall > wall_until:
            return
        if wall > horizon:
            return
        yield wall
        horizon = _years_later(wall)


def _expanded(calendar: Calendar, parts: RuleParts, near: datetime | None) -> Iterator[datetime]:
    start = calendar.dtstart
    if parts.plain_yearly and start.month == 2 and start.day == 29 and calendar.feb29 != "skip":
        yield from _leap_anniversaries(start, parts, calendar.feb29)
        return
    rule: du.rrule | None = None
    whole: du.rrule | None = None
    try:
        if near is not None and near > start:
            rule = _resumed_rule(parts.text, start, period_start(parts, start, near))
        whole = _whole_first_period(parts.text, start) if rule is None else None
        if rule is None and whole is None:
            rule = _dateutil_rule(parts.text, start)
    except ValueError:  # dateutil: an INTERVAL that BYHOUR/BYMINUTE/BYSECOND never meets
        return
    if whole is not None:
        yield from _from_dtstart(_dateutil(whole), start, parts.count)
        return
    assert rule is not None
    yield from _dateutil(rule)


@functools.lru_cache(maxsize=4096)
def _dateutil_rule(text: str, start: datetime) -> du.rrule:
    return metered(rule_parts(text).dateutil_rule(start))


@functools.lru_cache(maxsize=4096)
def _resumed_rule(text: str, start: datetime, period: datetime) -> du.rrule | None:
    """Made once per rule and period: schedules alike share it within a materialiser round."""
    rule = resumed(rule_parts(text), start, period)
    return None if rule is None else metered(rule)


@functools.lru_cache(maxsize=4096)
def _whole_first_period(text: str, start: datetime) -> du.rrule | None:
    rule = whole_first_period(rule_parts(text), start)
    return None if rule is None else metered(rule)


def _from_dtstart(
    walls: Iterator[datetime], start: datetime, count: int | None
) -> Iterator[datetime]:
    """The walls from DTSTART on, COUNT of them at most: BYSETPOS's picks of the first period
    that fall before DTSTART (one per BYSETPOS value at most) neither fire nor count."""
    made = 0
    for wall in walls:
        if wall < start:
            continue
        yield wall
        made += 1
        if count is not None and made >= count:
            return


def _dateutil(rule: du.rrule) -> Iterator[datetime]:
    """The rule's wall times, one step of the active expansion budget each."""
    try:
        for wall in rule:
            charge(WALL_STEPS)
            yield wall
    except (OverflowError, ValueError):  # walked off the end of the calendar (year 9999)
        return


def anniversary(day: date, year: int, feb29: Feb29 = "feb28") -> date | None:
    """``day``'s anniversary in ``year``: 29 February in a common year is 28 February, 1 March
    or none, as ``feb29`` says (a yearly schedule's rule, also for chains of one-shot timers)."""
    try:
        return day.replace(year=year)
    except ValueError:
        if feb29 == "skip":
            return None
        return date(year, 2, 28) if feb29 == "feb28" else date(year, 3, 1)


def _leap_anniversaries(start: datetime, parts: RuleParts, feb29: Feb29) -> Iterator[datetime]:
    """29 February in leap years; 28 February or 1 March in the others (COUNT counts both)."""
    made = 0
    year = start.year
    while year <= 9999:
        day = anniversary(start.date(), year, feb29)
        assert day is not None  # feb29 is not "skip" here
        yield datetime.combine(day, start.time())
        made += 1
        if parts.count is not None and made >= parts.count:
            return
        year += parts.interval


def _years_later(wall: datetime) -> datetime:
    try:
        return wall + timedelta(days=366 * RULE_SEARCH_YEARS)
    except OverflowError:
        return datetime.max


def calendar_walls(
    calendar: Calendar, zone: ZoneInfo, near: datetime | None = None
) -> Iterator[datetime]:
    """Every wall time that fires, in order: the rule's (UNTIL in UTC applied) and the RDATEs,
    each on a business day (or dropped) when ``roll`` says so; an EXDATE removes an occurrence
    named by its own time or by the time it was rolled to. With ``near``, from some wall time
    at least a roll before ``near`` on (see :func:`rule_walls`)."""
    until = calendar.parts.until
    until_at = until.value.replace(tzinfo=UTC) if until is not None and until.utc else None
    own = rule_walls(calendar, near)
    if until_at is not None:
        own = _until_utc(own, zone, until_at)
    excluded = set(calendar.exdates)
    last: datetime | None = None
    dropped = 0
    for wall in heapq.merge(own, calendar.rdates):
        if wall in excluded:
            continue
        if calendar.roll is not None:
            charge(WALL_STEPS)  # a business-day check costs about what making the wall did
            day = business_day(
                wall.date(),
                calendar.roll,
                calendar.weekend,
                calendar.holidays,
                calendar.holiday_dates,
            )
            if day is None:
                dropped += 1
                if dropped > MAX_DROPPED:  # every one falls on a non-business day: none fire
                    return
                continue
            dropped = 0
            wall = datetime.combine(day, wall.time())
            if wall in excluded:  # the rolled time is what users see, and may exclude
                continue
        if last is not None and wall <= last:
            continue  # rolled onto (or before) one already made: one firing
        last = wall
        yield wall


def _until_utc(walls: Iterator[datetime], zone: ZoneInfo, until_at: datetime) -> Iterator[datetime]:
    for wall in walls:
        if to_utc(wall, zone, "compatible") > until_at:
            return
        yield wall


def calendar_instants(
    calendar: Calendar,
    zone: ZoneInfo,
    after: datetime,
    on_gap: str = "run_after",
    on_overlap: str = "once",
) -> Iterator[datetime]:
    """Every firing instant (UTC) strictly after the aware ``after``: increasing, no repeats.

    As in the cron engine, each wall time's earliest possible instant bounds every later wall
    time's instant from below, so an instant is given out once some wall time's earliest
    reaches it; a gap time read with the offset before the gap, or a repeated hour's second
    pass, waits in a heap until then.
    """
    after = after.astimezone(UTC)
    # Wall times more than a day (plus a roll) before `after` cannot fire after it: cheap skip.
    margin = timedelta(days=2 + (MAX_ROLL_DAYS if rolls_forward(calendar.roll) else 0))
    skip_before = after.astimezone(zone).replace(tzinfo=None) - margin
    # No rule time before walk_start fires after `after`; one rolled forward may come from a
    # month before, and the dedup of rolled times needs what that one was rolled onto.
    try:
        near: datetime | None = walk_start(after, zone) - (
            timedelta(days=MAX_ROLL_DAYS) if rolls_forward(calendar.roll) else timedelta(0)
        )
    except OverflowError:
        near = None
    pending: list[datetime] = []
    last = after
    for wall in calendar_walls(calendar, zone, near):
        if wall < skip_before:
            continue
        charge(RESOLVE_STEPS)
        kind = classify(wall, zone)
        earliest = to_utc(wall, zone, "earlier")
        if kind == "normal":
            heapq.heappush(pending, earliest)
        elif kind == "overlap":
            heapq.heappush(pending, earliest)
            if on_overlap == "both":
                heapq.heappush(pending, to_utc(wall, zone, "later"))
        elif on_gap != "skip":
            heapq.heappush(pending, to_utc(wall, zone, "compatible"))
        while pending and pending[0] <= earliest:
            instant = heapq.heappop(pending)
            if instant > last:
                last = instant
                yield instant
    while pending:
        instant = heapq.heappop(pending)
        if instant > last:
            last = instant
            yield instant
