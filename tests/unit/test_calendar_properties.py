"""Calendar rules against an independent expansion: walk every day and test it against the rule.

The rules drawn are those whose meaning is a plain predicate on a day (weekdays, days of the
month counted from either end, months, every n-th day, the last matching day of a month), so
the walk below says what they mean without sharing any code with python-dateutil or duetime.
Each wall time is resolved as RFC 5545 says, independently too (zoneinfo, fold=0 for a repeated
time; the offset before the gap for a missing one).
"""

from __future__ import annotations

import calendar as calendar_module
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from hypothesis import given, settings
from hypothesis import strategies as st

from duetime.errors import InvalidRrule
from duetime.timemath.recurrence.calendar import calendar_instants, parse_calendar
from duetime.timemath.tzmath import load_zone

DAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
ZONES = ("America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "Asia/Kolkata", "UTC")
TAKE = 25


@dataclass(frozen=True)
class Spec:
    """What a drawn rule means, as plain sets."""

    freq: str
    interval: int = 1
    weekdays: frozenset[int] = frozenset()
    monthdays: frozenset[int] = frozenset()
    months: frozenset[int] = frozenset()
    last: bool = False


@st.composite
def rules(draw: st.DrawFn) -> tuple[str, Spec]:
    freq = draw(st.sampled_from(("DAILY", "MONTHLY")))
    interval = draw(st.integers(1, 5)) if freq == "DAILY" else 1
    weekdays = frozenset(draw(st.sets(st.integers(0, 6), max_size=5)))
    monthdays = frozenset(
        draw(st.sets(st.sampled_from([1, 2, 15, 28, 30, 31, -1, -2]), max_size=3))
    )
    months = frozenset(draw(st.sets(st.integers(1, 12), max_size=4)))
    last = freq == "MONTHLY" and bool(weekdays) and draw(st.booleans())
    parts = [f"FREQ={freq}", f"INTERVAL={interval}"]
    if weekdays:
        parts.append("BYDAY=" + ",".join(DAYS[d] for d in sorted(weekdays)))
    if monthdays:
        parts.append("BYMONTHDAY=" + ",".join(map(str, sorted(monthdays))))
    if months:
        parts.append("BYMONTH=" + ",".join(map(str, sorted(months))))
    if last:
        parts.append("BYSETPOS=-1")
    return ";".join(parts), Spec(freq, interval, weekdays, monthdays, months, last)


def _matches(day: date, start: date, spec: Spec) -> bool:
    if (day - start).days % spec.interval:
        return False
    if spec.months and day.month not in spec.months:
        return False
    length = calendar_module.monthrange(day.year, day.month)[1]
    if spec.monthdays and not {day.day, day.day - length - 1} & spec.monthdays:
        return False
    if not spec.monthdays and not spec.weekdays and spec.freq == "MONTHLY":
        return day.day == start.day  # a plain monthly rule repeats DTSTART's day
    return not spec.weekdays or day.weekday() in spec.weekdays


def _expected_walls(start: datetime, spec: Spec) -> list[datetime]:
    found: list[datetime] = []
    day = start.date()
    month_matches: list[date] = []
    while len(found) < TAKE and day < date(start.year + 90, 1, 1):
        if _matches(day, start.date(), spec):
            month_matches.append(day)
        following = day + timedelta(days=1)
        if spec.last:
            if following.month != day.month:
                if month_matches:
                    found.append(datetime.combine(month_matches[-1], start.time()))
                month_matches = []
        elif month_matches:
            found.append(datetime.combine(month_matches.pop(), start.time()))
        day = following
    return [wall for wall in found if wall >= start][:TAKE]


def _rfc_instant(wall: datetime, zone: ZoneInfo) -> datetime:
    """PEP 495's fold=0 is RFC 5545's reading: the earlier of a repeated time, and a missing
    time with the offset in force before the gap."""
    return wall.replace(tzinfo=zone, fold=0).astimezone(UTC)


@settings(max_examples=100, deadline=None)
@given(
    rule=rules(),
    zone_name=st.sampled_from(ZONES),
    start=st.datetimes(min_value=datetime(2020, 1, 1), max_value=datetime(2030, 12, 31)),
)
def test_calendar_rules_agree_with_a_walk_over_every_day(
    rule: tuple[str, Spec], zone_name: str, start: datetime
) -> None:
    text, spec = rule
    start = start.replace(second=0, microsecond=0)
    zone = load_zone(zone_name)
    try:
        cal = parse_calendar(rrule=text, dtstart=start.isoformat(), zone=zone)
    except InvalidRrule:  # a rule no day matches (e.g. BYMONTHDAY=30;BYMONTH=2): refused
        assert _expected_walls(start, spec) == []
        return
    walls = _expected_walls(start, spec)
    got = []
    for instant in calendar_instants(cal, zone, datetime(2019, 1, 1, tzinfo=UTC)):
        if len(got) == len(walls) or instant.year >= start.year + 90:
            break
        got.append(instant)
    expected = sorted({_rfc_instant(wall, zone) for wall in walls})
    assert got == expected
