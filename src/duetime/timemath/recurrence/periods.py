"""A rule's periods: expand it from near a position, and decide in bounded time if it ever fires.

python-dateutil expands an RRULE period by period (the year, month, week, day, hour, minute or
second FREQ names) from DTSTART. Asking for the next occurrence after an instant years later
would walk every period in between, and a sub-daily rule gets slower every day it runs. Two
facts make a shortcut exact:

* DTSTART only gives a rule its phase (which periods INTERVAL counts) and the defaults of the
  parts it leaves out (FREQ=MONTHLY fires on DTSTART's day of the month, at DTSTART's time).
  Spelled out, those defaults no longer depend on DTSTART, and a rule started at the first
  instant of a later period of the same phase yields, from there on, exactly what the rule from
  DTSTART yields. BYSETPOS picks from a whole period, which that start keeps whole.
* COUNT counts from DTSTART: a rule with COUNT is always expanded from DTSTART.

BYSETPOS numbers the occurrences of a whole period ("a set of recurrence instances starts at
the beginning of the interval defined by the FREQ rule part", RFC 5545 section 3.3.10), DTSTART's
own period too: the week holding a Tuesday DTSTART begins on the Monday before it (WKST=MO), and
its second occurrence is counted from that Monday. dateutil counts the first week's set from
DTSTART onwards instead (its later weeks, months and years are whole), which moves every pick
of the first week; :func:`whole_first_period` expands the rule from its first period's real
start, and the times before DTSTART are then dropped (libical's reading: they neither fire nor
count towards COUNT).

The Gregorian calendar repeats every 400 years (146,097 days, 20,871 whole weeks), so a rule
that never fires within a few centuries of DTSTART never fires at all; moved by whole 400-year
cycles to just before year 9999, dateutil's walk of an empty rule ends there within at most
500 years of periods instead of running on for thousands of years (or, for a SECONDLY rule,
for ever).
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any

from dateutil import rrule as du

from duetime.timemath.recurrence.budget import metered
from duetime.timemath.recurrence.rrule_text import DAYS, RuleParts, weekday_of

CYCLE_YEARS = 400
"""The Gregorian calendar's period: every date falls on the same weekday 400 years later."""
_LAST_YEAR = 9999
_CHECK_SPAN = 100
"""A rule moved for the emptiness check keeps at least this many years before year 9999."""
_DAY_FREQS = ("YEARLY", "MONTHLY", "WEEKLY", "DAILY")
_SUB_DAILY = ("HOURLY", "MINUTELY", "SECONDLY")


def rule_kwargs(parts: RuleParts, dtstart: datetime) -> dict[str, Any]:
    """dateutil's arguments for the rule without COUNT, every default of DTSTART spelled out."""
    kwargs: dict[str, Any] = {"interval": parts.interval}
    for part, values in parts.by:
        if part == "WKST":
            kwargs["wkst"] = DAYS.index(values[0])
        elif part == "BYDAY":
            kwargs["byweekday"] = [weekday_of(value) for value in values]
        else:
            kwargs[part.lower()] = [int(value) for value in values]
    dayless = not any(
        name in kwargs for name in ("byweekno", "byyearday", "bymonthday", "byweekday")
    )
    if dayless and parts.freq == "YEARLY":
        kwargs.setdefault("bymonth", [dtstart.month])
        kwargs["bymonthday"] = [dtstart.day]
    elif dayless and parts.freq == "MONTHLY":
        kwargs["bymonthday"] = [dtstart.day]
    elif dayless and parts.freq == "WEEKLY":
        kwargs["byweekday"] = [du.weekday(dtstart.weekday())]
    if parts.freq in _DAY_FREQS:
        kwargs.setdefault("byhour", [dtstart.hour])
    if parts.freq != "MINUTELY" and parts.freq != "SECONDLY":
        kwargs.setdefault("byminute", [dtstart.minute])
    if parts.freq != "SECONDLY":
        kwargs.setdefault("bysecond", [dtstart.second])
    return kwargs


def period_start(parts: RuleParts, dtstart: datetime, wall: datetime) -> datetime:
    """The first instant of the latest period of the rule's phase that begins at or before
    ``wall`` (DTSTART's own period's start when ``wall`` is in it or earlier)."""
    n = parts.interval
    freq = parts.freq
    if freq == "YEARLY":
        return datetime(dtstart.year + _steps(wall.year - dtstart.year, n), 1, 1)
    if freq == "MONTHLY":
        first = dtstart.year * 12 + dtstart.month - 1
        index = first + _steps(wall.year * 12 + wall.month - 1 - first, n)
        return datetime(index // 12, index % 12 + 1, 1)
    if freq == "WEEKLY":
        wkst = DAYS.index(parts.values("WKST")[0]) if parts.has("WKST") else 0
        own = _week_start(dtstart.date(), wkst)
        weeks = (_week_start(wall.date(), wkst) - own).days // 7
        return datetime.combine(own + timedelta(weeks=_steps(weeks, n)), datetime.min.time())
    unit = {
        "DAILY": timedelta(days=1),
        "HOURLY": timedelta(hours=1),
        "MINUTELY": timedelta(minutes=1),
        "SECONDLY": timedelta(seconds=1),
    }[freq]
    own = _floor(dtstart, freq)
    return own + unit * _steps((_floor(wall, freq) - own) // unit, n)


def resumed(parts: RuleParts, dtstart: datetime, wall: datetime) -> du.rrule | None:
    """The rule expanded from the start of its period at or before ``wall``: from there on
    the same wall times as from DTSTART. None when that would not be exact or gains nothing
    (COUNT, or ``wall`` still in DTSTART's first period)."""
    if parts.count is not None:
        return None
    start = period_start(parts, dtstart, wall)
    if start <= dtstart:
        return None
    return du.rrule(_freq(parts), dtstart=start, **rule_kwargs(parts, dtstart))


def whole_first_period(parts: RuleParts, dtstart: datetime) -> du.rrule | None:
    """The rule (without COUNT) expanded from the first instant of DTSTART's own period, when
    BYSETPOS picks from that period and dateutil would count it from DTSTART instead; None
    otherwise (no BYSETPOS, DTSTART at its period's start, or a period before year 1)."""
    if not parts.has("BYSETPOS"):
        return None
    try:
        start = period_start(parts, dtstart, dtstart)
    except (OverflowError, ValueError):
        return None
    if start >= dtstart:
        return None
    return du.rrule(_freq(parts), dtstart=start, **rule_kwargs(parts, dtstart))


def ever_fires(parts: RuleParts, dtstart: datetime) -> bool:
    """Does the rule (COUNT and UNTIL aside) yield any time within at least 100 years of
    DTSTART? Decided in bounded time (see the module's note)."""
    kwargs = rule_kwargs(parts, dtstart)
    if parts.has("BYSETPOS"):
        # BYSETPOS picks a time of a period only if it counts no further than the period can
        # hold: a day or shorter period holds the same times whenever it holds any; a longer
        # one at most its days times those. Decided here, an empty rule is not walked for
        # centuries of periods (a year of 366 days tested each, hundreds of times).
        size = _times_per_period(parts.freq, kwargs)
        if parts.freq in ("YEARLY", "MONTHLY", "WEEKLY"):
            size *= _most_days(parts, kwargs)
        if not any(-size <= int(pos) <= size for pos in parts.values("BYSETPOS")):
            return False
    cycles = max(0, (_LAST_YEAR - _CHECK_SPAN - dtstart.year) // CYCLE_YEARS)
    moved = dtstart.replace(year=dtstart.year + cycles * CYCLE_YEARS)
    try:
        rule = metered(du.rrule(_freq(parts), dtstart=moved, **kwargs))
        return next(iter(rule), None) is not None
    except (OverflowError, ValueError):  # an impossible INTERVAL with BYHOUR..., or year 9999
        return False


def _times_per_period(freq: str, kwargs: dict[str, Any]) -> int:
    """How many times one period of a DAILY or shorter rule holds (a SECONDLY one: one); for a
    longer rule, how many one of its days holds."""
    if freq == "SECONDLY":
        return 1
    size = len(kwargs["bysecond"])
    if freq != "MINUTELY":
        size *= len(kwargs["byminute"])
    if freq != "MINUTELY" and freq != "HOURLY":
        size *= len(kwargs["byhour"])
    return size


_PERIOD_DAYS = {"YEARLY": 366, "MONTHLY": 31, "WEEKLY": 7}


def _most_days(parts: RuleParts, kwargs: dict[str, Any]) -> int:
    """At most how many days one period of a YEARLY, MONTHLY or WEEKLY rule holds: each day
    part allows no more than its values can name in one (a year day, one day; a week number,
    seven; a day of the month, one a month), and a day must pass every part."""
    most = _PERIOD_DAYS[parts.freq]
    months = {"YEARLY": len(kwargs.get("bymonth", ())) or 12, "MONTHLY": 1, "WEEKLY": 2}
    months_in = months[parts.freq]  # a week may hold the end of one month and the next's start
    most = min(most, 31 * months_in)
    if "byyearday" in kwargs:
        most = min(most, len(kwargs["byyearday"]))
    if "byweekno" in kwargs:
        most = min(most, 7 * len(kwargs["byweekno"]))
    if "bymonthday" in kwargs:
        most = min(most, len(kwargs["bymonthday"]) * months_in)
    return most


def _freq(parts: RuleParts) -> int:
    return int(getattr(du, parts.freq))


def _steps(units: int, interval: int) -> int:
    """Whole periods of the rule's phase in ``units`` periods: a multiple of INTERVAL, >= 0."""
    return max(0, units // interval) * interval


def _week_start(day: date, wkst: int) -> date:
    return day - timedelta(days=(day.weekday() - wkst) % 7)


def _floor(wall: datetime, freq: str) -> datetime:
    if freq == "DAILY":
        return wall.replace(hour=0, minute=0, second=0, microsecond=0)
    if freq == "HOURLY":
        return wall.replace(minute=0, second=0, microsecond=0)
    if freq == "MINUTELY":
        return wall.replace(second=0, microsecond=0)
    assert freq in _SUB_DAILY
    return wall.replace(microsecond=0)
