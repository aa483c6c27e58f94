"""ISO 8601 durations that keep calendar parts apart, so P15D means 15 days on the wall clock.

``isodate`` folds ``P15D`` and ``PT360H`` into the same ``timedelta``; the scheduler must not,
because across a DST change 15 calendar days in New York are 359 or 361 real hours. Hence a
small parser of our own: years/months and weeks/days are *calendar* parts, hours/minutes/seconds
are the *exact* (``clock``) part, added in real elapsed time (as TC39 Temporal and RFC 5545 do).
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_EVEN, Decimal
from zoneinfo import ZoneInfo

from duetime.errors import InvalidInput
from duetime.timemath.bounds import (
    DURATION_LIMIT_TEXT,
    MAX_DURATION_DAYS,
    check_seconds,
    check_timedelta,
)
from duetime.timemath.tzmath import Disambiguation, is_aware, to_local, to_utc

# "More than 100 years" counts a month as an average Gregorian month.
_MAX_DAYS = Decimal(MAX_DURATION_DAYS)
_DAYS_PER_MONTH = Decimal("365.2425") / 12
_MAX_TEXT = 64
_MICRO = Decimal("0.000001")

_NUMBER = r"(\d+(?:[.,]\d+)?)"
_ISO_DURATION = re.compile(
    rf"P(?:{_NUMBER}Y)?(?:{_NUMBER}M)?(?:{_NUMBER}W)?(?:{_NUMBER}D)?"
    rf"(?:T(?:{_NUMBER}H)?(?:{_NUMBER}M)?(?:{_NUMBER}S)?)?"
)
_PLAIN_SECONDS = re.compile(r"\d+(?:\.\d+)?")
_UNITS = ("years", "months", "weeks", "days", "hours", "minutes", "seconds")
_SECONDS_PER_UNIT = {"hours": 3600, "minutes": 60, "seconds": 1}


@dataclass(frozen=True, slots=True)
class CalendarDuration:
    """A non-negative span: calendar months and days, then an exact clock part."""

    months: int = 0
    days: int = 0
    clock: timedelta = timedelta(0)

    def __post_init__(self) -> None:
        if self.months < 0 or self.days < 0 or self.clock < timedelta(0):
            raise ValueError("CalendarDuration parts must not be negative")

    @property
    def is_calendar(self) -> bool:
        """True when the span depends on the calendar (and so on a zone), not only on real time."""
        return self.months != 0 or self.days != 0

    def isoformat(self) -> str:
        """The canonical ISO 8601 text, so a parsed duration can be stored and read back."""
        years, months = divmod(self.months, 12)
        date_part = "".join(
            f"{value}{unit}"
            for value, unit in ((years, "Y"), (months, "M"), (self.days, "D"))
            if value
        )
        micros = self.clock // timedelta(microseconds=1)
        hours, micros = divmod(micros, 3_600_000_000)
        minutes, micros = divmod(micros, 60_000_000)
        time_part = "".join(
            f"{value}{unit}" for value, unit in ((hours, "H"), (minutes, "M")) if value
        )
        if micros:
            time_part += format((Decimal(micros) / 1_000_000).normalize(), "f") + "S"
        if not date_part and not time_part:
            return "PT0S"
        return "P" + date_part + ("T" + time_part if time_part else "")


def parse_duration(value: str | int | float | timedelta, field: str = "delay") -> CalendarDuration:
    """Read a user's delay (ISO 8601 text, seconds, or timedelta) so bad ones name the field."""
    if isinstance(value, bool):
        raise InvalidInput(field, "must be an ISO 8601 duration or a number of seconds, not a bool")
    if isinstance(value, timedelta):
        return CalendarDuration(clock=check_timedelta(value, field))
    if isinstance(value, int | float):
        return CalendarDuration(clock=check_seconds(value, field))
    if isinstance(value, str):
        return _parse_text(value, field)
    raise InvalidInput(
        field,
        "must be an ISO 8601 duration, a number of seconds or a timedelta, "
        f"not {type(value).__name__}",
    )


def _parse_text(text: str, field: str) -> CalendarDuration:
    """Parse 'P1Y2M3DT4H5M6.5S', 'P2W' or plain seconds ('90')."""
    cleaned = text.strip().upper()
    if not cleaned:
        raise InvalidInput(field, "must not be empty; give an ISO 8601 duration such as 'PT90S'")
    if len(cleaned) > _MAX_TEXT:
        raise InvalidInput(field, "is too long to be a duration")
    if cleaned.startswith("-"):
        raise InvalidInput(field, f"must not be negative, got {text!r}")
    if _PLAIN_SECONDS.fullmatch(cleaned):
        return CalendarDuration(clock=check_seconds(float(cleaned), field))
    match = _ISO_DURATION.fullmatch(cleaned)
    if match is None or cleaned.endswith(("P", "T")):
        raise InvalidInput(
            field, f"{text!r} is not an ISO 8601 duration (e.g. 'PT90S', 'P15D', 'P1M', 'P2W')"
        )
    groups = zip(_UNITS, match.groups(), strict=True)
    given = [(unit, number) for unit, number in groups if number is not None]
    fractional = [unit for unit, number in given if "." in number or "," in number]
    if fractional and fractional != [given[-1][0]]:
        raise InvalidInput(field, f"{text!r}: only the last component may have a fraction")
    if fractional and fractional[0] not in _SECONDS_PER_UNIT:
        raise InvalidInput(field, f"{text!r}: years, months, weeks and days must be whole numbers")
    numbers = dict.fromkeys(_UNITS, Decimal(0))
    numbers.update({unit: Decimal(number.replace(",", ".")) for unit, number in given})
    _check_size(numbers, field)
    clock_seconds = sum(numbers[unit] * factor for unit, factor in _SECONDS_PER_UNIT.items())
    micros = int(Decimal(clock_seconds).quantize(_MICRO, rounding=ROUND_HALF_EVEN) * 1_000_000)
    return CalendarDuration(
        months=int(numbers["years"]) * 12 + int(numbers["months"]),
        days=int(numbers["weeks"]) * 7 + int(numbers["days"]),
        clock=timedelta(microseconds=micros),
    )


def _check_size(numbers: dict[str, Decimal], field: str) -> None:
    """Refuse spans over 100 years before building a timedelta that could overflow."""
    approx_days = (
        (numbers["years"] * 12 + numbers["months"]) * _DAYS_PER_MONTH
        + numbers["weeks"] * 7
        + numbers["days"]
        + (numbers["hours"] * 3600 + numbers["minutes"] * 60 + numbers["seconds"]) / 86400
    )
    if approx_days > _MAX_DAYS:
        raise InvalidInput(field, DURATION_LIMIT_TEXT)


def parse_span(value: str | int | float | timedelta, field: str) -> timedelta:
    """A duration in real time, for spans that belong to no zone (``expires_after``, the
    configuration's durations): a month counts 31 days, a day 24 hours, at most 100 years."""
    parsed = parse_duration(value, field)
    span = timedelta(days=parsed.months * 31 + parsed.days) + parsed.clock
    return check_timedelta(span, field)


def add_months(wall: datetime, months: int) -> datetime:
    """Move a wall-clock time by whole months, clamping the day (Jan 31 + 1 month = Feb 28/29)."""
    carry, month_index = divmod(wall.month - 1 + months, 12)
    year = wall.year + carry
    month = month_index + 1
    if year > 9999:
        raise OverflowError("year out of range")
    day = min(wall.day, calendar.monthrange(year, month)[1])
    return wall.replace(year=year, month=month, day=day)


def month_start(instant: datetime) -> datetime:
    """The first instant (UTC) of ``instant``'s month: history partitions are UTC months."""
    utc = instant.astimezone(UTC)
    return datetime(utc.year, utc.month, 1, tzinfo=UTC)


def months_between(first: datetime, last: datetime) -> list[datetime]:
    """The starts of every UTC month from ``first``'s through ``last``'s."""
    months = []
    current = month_start(first)
    end = month_start(last)
    while current <= end:
        months.append(current)
        current = add_months(current, 1)
    return months


def add_duration(
    start: datetime,
    d: CalendarDuration,
    zone: ZoneInfo | None,
    disambiguation: Disambiguation = "compatible",
    field: str = "delay",
) -> datetime:
    """Add ``d`` to an instant: calendar parts on ``zone``'s wall clock, the rest in real time."""
    if not is_aware(start):
        raise ValueError("add_duration needs a timezone-aware start")
    try:
        moved = start.astimezone(UTC)
        if d.is_calendar:
            wall = to_local(moved, zone) if zone is not None else moved.replace(tzinfo=None)
            wall = add_months(wall, d.months) + timedelta(days=d.days)
            if zone is not None:
                moved = to_utc(wall, zone, disambiguation, field)
            else:
                moved = wall.replace(tzinfo=UTC)
        return moved + d.clock
    except OverflowError as exc:
        raise InvalidInput(field, "puts the due time beyond the year 9999") from exc
