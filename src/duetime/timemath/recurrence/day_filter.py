"""Which days a rule's BYxxx parts allow: a cheap check that a rule can match some day at all.

dateutil walks a rule whose parts never match (``BYMONTH=2;BYMONTHDAY=30``) period by period up
to year 9999 (a SECONDLY one for ever) before it admits that nothing comes. Each day filter
(month, day of the month, day of the year, ISO week, weekday) is a property of a date alone, so
trying the days of the years ahead decides, in bounded time, whether any day passes them all: a
necessary condition for a rule to fire, checked before dateutil is asked.
"""

from __future__ import annotations

import functools
from datetime import date, timedelta

from duetime.timemath.recurrence.rrule_text import DAYS, RuleParts

RULE_SEARCH_YEARS = 100
"""How many years an RFC 5545 rule is searched for a day, and for its next occurrence, before it
is said never to fire (again): a rule with no occurrence within them of DTSTART is refused.
Longer than cron's search, since ``INTERVAL`` spaces a rule's occurrences as far as it likes."""
DayKey = tuple[tuple[str, tuple[str, ...]], ...]

_DAY_PARTS = ("BYMONTH", "BYWEEKNO", "BYYEARDAY", "BYMONTHDAY", "BYDAY")


def day_filter_key(parts: RuleParts) -> DayKey:
    """The parts that filter days, in the rule's order: what the check depends on."""
    return tuple((name, values) for name, values in parts.by if name in _DAY_PARTS)


def day_parts(parts: RuleParts) -> str:
    """The rule's day parts as written (``BYMONTH=2;BYMONTHDAY=30``), for an error."""
    return ";".join(f"{n}={','.join(v)}" for n, v in day_filter_key(parts)) or "FREQ"


def some_day_matches(start: date, key: DayKey) -> bool:
    """Does some day within RULE_SEARCH_YEARS of ``start``'s year pass every day filter?"""
    if not any(name in ("BYMONTH", "BYMONTHDAY", "BYYEARDAY", "BYWEEKNO") for name, _ in key):
        return True
    return _days_match(key, start.year)


@functools.lru_cache(maxsize=1024)
def _days_match(key: DayKey, year: int) -> bool:
    """Is there a day in [year, year + RULE_SEARCH_YEARS) passing each day filter alone?"""
    filters = dict(key)
    months = {int(v) for v in filters.get("BYMONTH", ())}
    monthdays = {int(v) for v in filters.get("BYMONTHDAY", ())}
    yeardays = {int(v) for v in filters.get("BYYEARDAY", ())}
    weeknos = {int(v) for v in filters.get("BYWEEKNO", ())}
    weekdays = {DAYS.index(v[-2:]) for v in filters.get("BYDAY", ())}
    day = date(year, 1, 1)
    end = date(min(year + RULE_SEARCH_YEARS, 9999), 12, 31)
    step = timedelta(days=1)
    while day < end:
        if months and day.month not in months:
            day += step
            continue
        if monthdays and not _month_day_in(day, monthdays):
            day += step
            continue
        if yeardays and not _year_day_in(day, yeardays):
            day += step
            continue
        if weeknos and not _week_in(day, weeknos):
            day += step
            continue
        if weekdays and day.weekday() not in weekdays:
            day += step
            continue
        return True
    return False


def day_allowed(day: date, key: DayKey) -> bool:
    """Does ``day`` pass each day filter (a numbered weekday read as its weekday: at least the
    days the rule uses)?"""
    for name, values in key:
        if name == "BYMONTH" and day.month not in {int(v) for v in values}:
            return False
        if name == "BYMONTHDAY" and not _month_day_in(day, {int(v) for v in values}):
            return False
        if name == "BYYEARDAY" and not _year_day_in(day, {int(v) for v in values}):
            return False
        if name == "BYWEEKNO" and not _week_in(day, {int(v) for v in values}):
            return False
        if name == "BYDAY" and day.weekday() not in {DAYS.index(v[-2:]) for v in values}:
            return False
    return True


def _month_day_in(day: date, wanted: set[int]) -> bool:
    last = ((day.replace(day=28) + timedelta(days=4)).replace(day=1) - timedelta(days=1)).day
    return day.day in wanted or day.day - last - 1 in wanted


def _year_day_in(day: date, wanted: set[int]) -> bool:
    number = day.timetuple().tm_yday
    length = 366 if date(day.year, 12, 31).timetuple().tm_yday == 366 else 365
    return number in wanted or number - length - 1 in wanted


def _week_in(day: date, wanted: set[int]) -> bool:
    year, week, _ = day.isocalendar()
    weeks = date(year, 12, 28).isocalendar()[1]
    return week in wanted or week - weeks - 1 in wanted
