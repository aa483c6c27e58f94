"""How many occurrences in a row ``roll="skip"`` drops, decided when a rule is made.

A lookup drops at most :data:`MAX_DROPPED` occurrences in a row before it takes the calendar
for one that never fires again: without such a bound, a rule whose occurrences all fall on
non-business days would be walked for ever. A dense rule drops more than that over an ordinary
weekend (every 10 seconds: 17,280 on a Saturday and Sunday), and would stop for good, silently,
at its first one. Such a rule is refused when it is made instead, naming ``roll``.

Which runs of non-business days are counted: those within a year of DTSTART (the weekends, and
the public holidays of a year, which recur; 28 years for a rule on some dates of the year only,
so that each of its dates falls on each weekday), and those that hold one of the caller's own
holiday dates; runs with business days between them on which the rule has no time drop in one
row, so they are joined. Only a rule that could place more than the bound on such a stretch
(its most occurrences a day times the closed days its BYxxx day parts allow) is walked there,
as far as the bound: the usual rules, a few occurrences a day, are never walked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import date, datetime, timedelta

from duetime.timemath.recurrence.business import is_business_day
from duetime.timemath.recurrence.day_filter import day_allowed, day_filter_key
from duetime.timemath.recurrence.periods import rule_kwargs
from duetime.timemath.recurrence.rrule_text import RuleParts

MAX_DROPPED = 10_000
"""Occurrences in a row that ``roll=skip`` may drop before the calendar counts as one that
never fires (a weekday rule on a weekend-only calendar would otherwise be walked for ever)."""
SCAN_DAYS = 366
"""Runs of non-business days with a day this many days from DTSTART on are counted."""
CYCLE_DAYS = 28 * 365 + 7
"""28 years: every date falls on every weekday in them (within a century)."""
MAX_RUN_DAYS = 4000
"""The longest run followed: more than the caller's holiday dates (at most 1000) and the
weekends between them can make."""
_SECONDS = {"HOURLY": 3600, "MINUTELY": 60, "SECONDLY": 1}
_WALK_BUDGET = 50 * MAX_DROPPED
"""Wall times walked for one run at most (a long period's times before the run included)."""


def crowded(
    parts: RuleParts,
    dtstart: datetime,
    weekend: tuple[int, ...],
    holidays: str | None,
    dates: tuple[date, ...],
    walls_from: Callable[[datetime], Iterator[datetime]],
) -> str | None:
    """Why skip would stop the rule for good at some run of non-business days, or None.

    ``walls_from(near)`` yields the rule's wall times from ``near`` on (maybe some before it),
    COUNT aside: a rule that would end sooner is judged as if it went on. Runs with business
    days between them on which the rule has no time drop in one row (a rule on Mondays and
    Wednesdays with both closed never fires on the Tuesday between)."""
    most = per_day(parts, dtstart)
    key = day_filter_key(parts)
    # A rule on some dates of the year (BYMONTH, BYMONTHDAY...) meets each weekday on them
    # within the 28 years of the calendar's cycle; one on weekdays within a year.
    span = CYCLE_DAYS if any(name != "BYDAY" for name, _ in key) else SCAN_DAYS
    if most * (SCAN_DAYS + 3 * len(dates)) <= MAX_DROPPED:
        # Dropping that many would take a year of the rule's days closed in a row, or the
        # caller's dates and their weekends: a rule that rare is refused if it never fires.
        return None

    def allowed(day: date) -> bool:
        return day_allowed(day, key)

    found = runs(dtstart.date(), weekend, holidays, dates, span, allowed)
    for first, last, closed in _stretches(found, walls_from, allowed):
        used = sum(map(allowed, closed))
        if most * used <= MAX_DROPPED:
            continue
        dropped = _dropped(walls_from(_midnight(first)), first, last)
        if dropped is None:
            return (
                f"{parts.text} places up to {most:,} occurrences a day: too many to walk "
                f"past the non-business days from {first} to {last}; give it fewer"
            )
        if dropped > MAX_DROPPED:
            return (
                f"skip would drop more than {MAX_DROPPED:,} occurrences of {parts.text} in a "
                f"row on the non-business days from {first} to {last}, and a lookup stops "
                "there for good: make the rule less frequent, or leave such days out of it "
                "(BYDAY=MO,TU,WE,TH,FR leaves out a Saturday-Sunday weekend)"
            )
    return None


def _stretches(
    found: list[tuple[date, date]],
    walls_from: Callable[[datetime], Iterator[datetime]],
    allowed: Callable[[date], bool],
) -> Iterator[tuple[date, date, list[date]]]:
    """Runs joined across the business days between them that hold none of the rule's times:
    (first day, last day, the closed days)."""
    current: tuple[date, date, list[date]] | None = None
    for first, last in found:
        days = [first + timedelta(days=n) for n in range((last - first).days + 1)]
        if current is not None and not _fires_between(walls_from, allowed, current[1], first):
            current = (current[0], last, current[2] + days)
            continue
        if current is not None:
            yield current
        current = (first, last, days)
    if current is not None:
        yield current


def _fires_between(
    walls_from: Callable[[datetime], Iterator[datetime]],
    allowed: Callable[[date], bool],
    after: date,
    before: date,
) -> bool:
    """Has the rule a time on a day strictly between ``after`` and ``before``? Not when its
    day parts allow none of those days (asked without walking a sparse rule for years)."""
    begin = _step(after, 1)
    if begin is None or begin >= before:
        return False
    if not any(allowed(begin + timedelta(days=n)) for n in range((before - begin).days)):
        return False
    for walked, wall in enumerate(walls_from(_midnight(begin))):
        if wall.date() >= begin:
            return wall.date() < before
        if walked > _WALK_BUDGET:
            return True  # undecided: the runs are judged apart
    return False


def _midnight(day: date) -> datetime:
    return datetime.combine(day, datetime.min.time())


def per_day(parts: RuleParts, dtstart: datetime) -> int:
    """The most occurrences the rule can place on one day (INTERVAL aside for periods of a day
    or longer, so at least as many as it does)."""
    given = rule_kwargs(parts, dtstart)
    hours = len(given.get("byhour", ())) or 24
    minutes = len(given.get("byminute", ())) or 60
    seconds = len(given.get("bysecond", ())) or 60
    step = _SECONDS.get(parts.freq)
    if step is None:  # a day or longer: BYSETPOS picks at most its count from a period
        times = hours * minutes * seconds
        picks = len(parts.values("BYSETPOS"))
        return min(times, picks) if picks else times
    each = -(-86400 // (step * parts.interval))  # periods a day holds at most
    if parts.freq == "HOURLY":
        return min(hours, each) * minutes * seconds
    if parts.freq == "MINUTELY":
        return min(hours * minutes, each) * seconds
    return min(hours * minutes * seconds, each)


def runs(
    start: date,
    weekend: tuple[int, ...],
    holidays: str | None,
    dates: tuple[date, ...],
    span: int = SCAN_DAYS,
    allowed: Callable[[date], bool] = bool,
) -> list[tuple[date, date]]:
    """Runs of consecutive non-business days, each as (first day, last day): those holding one
    of ``dates``, and those holding a day within ``span`` days of ``start`` that ``allowed``
    lets through (the others hold none of the rule's times)."""

    def closed(day: date) -> bool:
        return not is_business_day(day, weekend, holidays, dates)

    found: list[tuple[date, date]] = []
    seen: set[date] = set()
    candidates = [day for n in range(span) if (day := _step(start, n)) is not None and allowed(day)]
    candidates += dates
    for candidate in candidates:
        if candidate in seen or not closed(candidate):
            continue
        first = last = candidate
        for _ in range(MAX_RUN_DAYS):
            earlier = _step(first, -1)
            if earlier is None or not closed(earlier):
                break
            first = earlier
        for _ in range(MAX_RUN_DAYS):
            later = _step(last, 1)
            if later is None or not closed(later):
                break
            last = later
        seen.update(first + timedelta(days=n) for n in range((last - first).days + 1))
        found.append((first, last))
    return sorted(found)


def _dropped(walls: Iterator[datetime], first: date, last: date) -> int | None:
    """The rule's wall times on the days ``first`` to ``last``, counted up to one past
    MAX_DROPPED; None when more than the walk's budget come before the run ends."""
    dropped = 0
    for walked, wall in enumerate(walls):
        if walked > _WALK_BUDGET:
            return None
        if wall.date() > last:
            break
        if wall.date() >= first:
            dropped += 1
            if dropped > MAX_DROPPED:
                break
    return dropped


def _step(day: date, days: int) -> date | None:
    try:
        return day + timedelta(days=days)
    except OverflowError:
        return None
