"""The cron engine: naive wall-clock matches (cronsim, no zone) mapped to instants by our DST rules.

cronsim's own zone-aware mode is not used to produce instants: it collapses gaps of any length
(cronie drops the matches inside a jump of more than 3 hours, e.g. Pacific/Apia's missing
2011-12-30) and, for wildcard jobs, misses real wall-clock matches next to a shift that is not a
whole hour (Australia/Lord_Howe's 02:45 just after its 30-minute gap, Pacific/Chatham's second
02:45-02:59). Walking the plain calendar and deciding each match with :mod:`duetime.timemath.tzmath`
keeps every DST decision in one place and makes each rule below a line of code.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

from cronsim import CronSim

from duetime.timemath.recurrence.budget import RESOLVE_STEPS, WALL_STEPS, charge
from duetime.timemath.tzmath import classify, to_utc

OnGap = Literal["run_after", "skip"]
OnOverlap = Literal["once", "both"]

#: cronie treats a forward jump of more than 3 hours as "the clock changed a lot" and does not
#: run the fixed-time jobs it skipped (``cron.c``: ``timeDiff > 3*MINUTE_COUNT``).
CLOCK_JUMP = timedelta(hours=3)
#: How many years a cron walk goes without a firing before it decides none comes (again).
#: cronsim itself gives up on a naive match after 50 years, so a longer search would find no
#: more; five fields leave no longer gap (``0 0 * 2 MON#5``, a fifth Monday in February, comes
#: 28 or, across a century's missing leap day, 40 years apart).
CRON_SEARCH_YEARS = 50

_ONE_SECOND = timedelta(seconds=1)


def is_fixed_time(expression: str) -> bool:
    """cronie's distinction: neither the minute nor the hour field starts with ``*``."""
    minute, hour = expression.split()[:2]
    return not minute.startswith("*") and not hour.startswith("*")


def cron_instants(
    expression: str,
    zone: ZoneInfo,
    after: datetime,
    on_gap: OnGap = "run_after",
    on_overlap: OnOverlap = "once",
) -> Iterator[datetime]:
    """Every firing instant (UTC) strictly after the aware ``after``: increasing, no duplicates.

    Walk the naive wall-clock matches and map each to 0, 1 or 2 instants (:func:`instants_of`).
    The *first* instant of each match never decreases as the wall time grows (a gap's collapsed
    firing is the transition itself, the earliest instant after the gap; a repeated hour's first
    pass comes before everything after it), so an instant is emitted as soon as some match's
    first instant reaches it; only the second passes of a repeated hour wait in the heap.
    """
    fixed = is_fixed_time(expression)
    after = after.astimezone(UTC)
    start = walk_start(after, zone)
    horizon = _years_later(start)
    sim = CronSim(expression, start)
    pending: list[datetime] = []
    last = after
    while True:
        try:
            wall: datetime | None = next(sim, None)
        except (OverflowError, ValueError):  # walked off the end of the calendar (year 9999)
            wall = None
        if wall is None or wall > horizon:
            break
        charge(WALL_STEPS + RESOLVE_STEPS)
        instants = instants_of(wall, zone, fixed, on_gap, on_overlap)
        if not instants:
            continue
        horizon = _years_later(wall)
        for instant in instants:
            heapq.heappush(pending, instant)
        floor = instants[0]
        while pending and pending[0] <= floor:
            instant = heapq.heappop(pending)
            if instant > last:
                last = instant
                yield instant
    while pending:
        instant = heapq.heappop(pending)
        if instant > last:
            last = instant
            yield instant


def instants_of(
    wall: datetime, zone: ZoneInfo, fixed: bool, on_gap: OnGap, on_overlap: OnOverlap
) -> list[datetime]:
    """The instants at which one wall-clock match fires, earliest first (as cronie fires them)."""
    kind = classify(wall, zone)
    earlier = to_utc(wall, zone, "earlier")
    if kind == "normal":
        return [earlier]
    later = to_utc(wall, zone, "later")
    if kind == "overlap":
        # Wildcard jobs see the repeated wall time twice; fixed-time ones by on_overlap.
        if fixed and on_overlap == "once":
            return [earlier]
        return [earlier, later]
    # A gap: wildcard jobs never see this wall time; fixed-time jobs run right after it,
    # unless told to skip or the clock jumped so far that cronie stops catching up.
    if not fixed or on_gap == "skip" or later - earlier > CLOCK_JUMP:
        return []
    return [transition_between(zone, earlier, later)]


def transition_between(zone: ZoneInfo, before: datetime, after: datetime) -> datetime:
    """The first instant in ``(before, after]`` already on ``after``'s UTC offset (bisection)."""
    target = after.astimezone(zone).utcoffset()
    low, high = before, after
    while high - low > _ONE_SECOND:
        middle = (low + (high - low) / 2).replace(microsecond=0)
        if middle <= low:  # pragma: no cover - only with sub-second endpoints
            break
        if middle.astimezone(zone).utcoffset() == target:
            high = middle
        else:
            low = middle
    return high


def walk_start(after: datetime, zone: ZoneInfo) -> datetime:
    """A naive wall time early enough that no match before it fires after ``after``.

    A match at wall time ``n`` fires at ``n - offset`` for the offset in force then, so anything
    after ``after`` comes from ``n > after + offset``. Offsets are sampled over the next two days
    (instants further out come from wall times beyond any difference of offsets); cronsim then
    ticks one second before its first match.
    """
    offsets = []
    for hours in range(0, 49, 6):
        try:
            offset = (after + timedelta(hours=hours)).astimezone(zone).utcoffset()
        except OverflowError:  # the end of the calendar is near
            break
        assert offset is not None
        offsets.append(offset)
    naive = after.replace(tzinfo=None, microsecond=0)
    try:
        return naive + min(offsets, default=timedelta(0)) - _ONE_SECOND
    except OverflowError:
        return naive


def _years_later(wall: datetime) -> datetime:
    try:
        return wall + timedelta(days=366 * CRON_SEARCH_YEARS)
    except OverflowError:
        return datetime.max
