"""The range of every instant and duration duetime accepts, so no sum it computes overflows.

Instants lie in ``[1970-01-01T00:00Z, 9000-01-01T00:00Z)`` and durations (a delay,
``expires_after``, a backoff, a snooze, a retry delay, a schedule's ``every``, the durations of
the configuration) are at most 100 years. The worker and the stores add a few durations to an
instant (``due_at + expires_after``, ``now + snooze``, ``now + retry delay``); with these
limits even nine such additions stay below the year 9999, the last one a ``datetime`` holds.
Pure: imports nothing else from duetime but the error type.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from duetime.errors import InvalidInput

MIN_YEAR = 1970
MAX_YEAR = 8999
EARLIEST_AT = datetime(MIN_YEAR, 1, 1, tzinfo=UTC)
LATEST_AT = datetime(MAX_YEAR + 1, 1, 1, tzinfo=UTC)
"""The first instant past the range (exclusive)."""
MAX_DURATION_DAYS = 36525
MAX_DURATION = timedelta(days=MAX_DURATION_DAYS)
"""100 years of 365.25 days."""
MAX_DURATION_SECONDS = MAX_DURATION.total_seconds()
DURATION_LIMIT_TEXT = "must not be longer than 100 years"


def check_year(year: int, field: str) -> None:
    """A calendar year of a wall-clock time or date, checked before building it."""
    if not MIN_YEAR <= year <= MAX_YEAR:
        raise InvalidInput(field, f"year {year} is out of range ({MIN_YEAR}..{MAX_YEAR})")


def check_instant(instant: datetime, field: str) -> datetime:
    """An aware instant inside the range, as UTC."""
    try:
        utc = instant.astimezone(UTC)
    except OverflowError:  # e.g. 0001-01-01T00:00+01:00: before the first representable UTC
        utc = None
    if utc is None or not EARLIEST_AT <= utc < LATEST_AT:
        raise InvalidInput(
            field, f"{instant.isoformat()} is out of range ({MIN_YEAR}..{MAX_YEAR} UTC)"
        )
    return utc


def check_seconds(seconds: int | float, field: str) -> timedelta:
    """A number of seconds as a duration: finite, not negative, at most 100 years."""
    if isinstance(seconds, float) and not math.isfinite(seconds):
        raise InvalidInput(field, f"must be a finite number of seconds, got {seconds}")
    if seconds < 0:
        raise InvalidInput(field, f"must not be negative, got {seconds} seconds")
    if seconds > MAX_DURATION_SECONDS:
        raise InvalidInput(field, DURATION_LIMIT_TEXT)
    return timedelta(seconds=seconds)


def check_timedelta(value: timedelta, field: str) -> timedelta:
    """A duration given as a ``timedelta``: not negative, at most 100 years."""
    if value < timedelta(0):
        raise InvalidInput(field, f"must not be negative, got {value}")
    if value > MAX_DURATION:
        raise InvalidInput(field, DURATION_LIMIT_TEXT)
    return value


def duration_value(value: timedelta | float, field: str) -> timedelta:
    """A ``timedelta`` or a number of seconds, bounded (handler outcomes, the worker's knobs)."""
    if isinstance(value, timedelta):
        return check_timedelta(value, field)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput(field, f"must be a timedelta or seconds, not {type(value).__name__}")
    return check_seconds(value, field)
