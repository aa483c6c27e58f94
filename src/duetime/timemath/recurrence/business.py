"""Business days: a weekend, public holidays (the ``holidays`` package) and a caller's own dates.

Payroll and billing say "the 15th, or the business day before when it is not one": an
occurrence on a non-business day is skipped or rolled to the next or previous business day, at
the same wall-clock time. The modified rolls are the money markets' (ISDA's "modified
following" and "modified preceding"): roll one way unless that leaves the month, then the other
way, so a month-end payment stays in its month and a first-of-month one does not go back.

Holiday sets are named ``CC`` or ``CC-SUBDIV`` (``DE-BE``, ``US-NY``): the ``holidays`` package
is kept up to date with every country's law, which a hand-kept list would not be. Its sets hold
the observed (substitute) days too (4 July 2026 is a Saturday: the US observes it on Friday the
3rd), so those are not business days either.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from datetime import date, timedelta
from typing import Literal, get_args

from duetime.errors import InvalidInput

Roll = Literal["skip", "forward", "backward", "modified_forward", "modified_backward"]
ROLLS: tuple[Roll, ...] = get_args(Roll)
_ISDA_NAMES = "ISDA's following, preceding, modified following, modified preceding"
WEEKDAY_NAMES = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
DEFAULT_WEEKEND = (5, 6)
MAX_ROLL_DAYS = 31
"""A roll that finds no business day within a month means the calendar has none: refused."""
_MAX_DATES = 1000


@functools.lru_cache(maxsize=256)
def _holiday_set(name: str) -> object:
    import holidays

    country, _, subdiv = name.partition("-")
    return holidays.country_holidays(country, subdiv=subdiv or None)


def check_holidays(value: object, field: str = "holidays") -> str | None:
    """A holiday calendar name the ``holidays`` package knows: ``DE``, ``DE-BE``, ``US-NY``."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(field, "must be a country code such as 'DE' or 'DE-BE'")
    import holidays

    name = value.strip().upper()
    country, _, subdiv = name.partition("-")
    supported = holidays.list_supported_countries()
    if country not in supported:
        raise InvalidInput(field, f"{country!r} is not a country the holidays calendar knows")
    if subdiv and subdiv not in [s.upper() for s in supported[country]]:
        known = ", ".join(supported[country][:40])
        raise InvalidInput(field, f"{subdiv!r} is not a subdivision of {country} (known: {known})")
    return name


def check_weekend(value: object, field: str = "weekend") -> tuple[int, ...]:
    """Weekday names (``sat,sun``; ``fri,sat``; none for a seven-day business week)."""
    if value is None:
        return DEFAULT_WEEKEND
    items: Iterable[object]
    if isinstance(value, str):
        items = [part.strip() for part in value.split(",") if part.strip()]
    elif isinstance(value, list | tuple):
        items = value
    else:
        raise InvalidInput(field, "must be weekday names such as 'sat,sun'")
    days = set()
    for item in items:
        if isinstance(item, int) and not isinstance(item, bool) and 0 <= item <= 6:
            days.add(item)
            continue
        text = str(item).strip().lower()[:3]
        if text not in WEEKDAY_NAMES:
            raise InvalidInput(field, f"{item!r} is not a weekday name (mon ... sun)")
        days.add(WEEKDAY_NAMES.index(text))
    if len(days) == 7:
        raise InvalidInput(field, "cannot hold every day of the week")
    return tuple(sorted(days))


def check_dates(value: object, field: str) -> tuple[date, ...]:
    """A list of ISO dates (``2027-12-24``), sorted, without repeats."""
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise InvalidInput(field, "must be a list of ISO dates such as '2027-12-24'")
    if len(value) > _MAX_DATES:
        raise InvalidInput(field, f"{len(value)} dates; at most {_MAX_DATES}")
    days = set()
    for item in value:
        if isinstance(item, date):
            days.add(item)
            continue
        try:
            days.add(date.fromisoformat(str(item)))
        except ValueError as exc:
            raise InvalidInput(field, f"{item!r} is not an ISO date such as '2027-12-24'") from exc
    return tuple(sorted(days))


def check_roll(value: object, field: str = "roll") -> Roll | None:
    if value is None:
        return None
    for choice in ROLLS:
        if value == choice:
            return choice
    raise InvalidInput(
        field,
        f"must be one of {', '.join(map(repr, ROLLS))} (the last four are {_ISDA_NAMES}), "
        f"not {value!r}",
    )


def rolls_forward(roll: Roll | None) -> bool:
    """May ``roll`` move an occurrence to a later day (up to MAX_ROLL_DAYS)? The modified rolls
    both may: modified_backward goes forward when going back would leave the month."""
    return roll in ("forward", "modified_forward", "modified_backward")


def rolls_backward(roll: Roll | None) -> bool:
    """May ``roll`` move an occurrence to an earlier day (up to MAX_ROLL_DAYS)?"""
    return roll in ("backward", "modified_forward", "modified_backward")


def is_business_day(
    day: date, weekend: tuple[int, ...], holidays: str | None, dates: tuple[date, ...]
) -> bool:
    """Not a weekend day, not a public holiday of ``holidays``, not one of ``dates``."""
    if day.weekday() in weekend or day in dates:
        return False
    return holidays is None or day not in _holiday_set(holidays)  # type: ignore[operator]


def business_day(
    day: date,
    roll: Roll,
    weekend: tuple[int, ...],
    holidays: str | None,
    dates: tuple[date, ...],
) -> date | None:
    """``day`` itself if it is a business day; else skipped (None) or rolled by ``roll``.

    A modified roll that finds no business day in the month either way (a month of holiday
    dates) leaves the month in its first direction: there is no day in it to stay on."""
    if is_business_day(day, weekend, holidays, dates):
        return day
    if roll == "skip":
        return None
    first = -1 if roll in ("backward", "modified_backward") else 1
    if roll in ("forward", "backward"):
        return _rolled(day, first, weekend, holidays, dates, None)
    return (
        _rolled(day, first, weekend, holidays, dates, day.month)
        or _rolled(day, -first, weekend, holidays, dates, day.month)
        or _rolled(day, first, weekend, holidays, dates, None)
    )


def _rolled(
    day: date,
    direction: int,
    weekend: tuple[int, ...],
    holidays: str | None,
    dates: tuple[date, ...],
    month: int | None,
) -> date | None:
    """The nearest business day after (``direction`` 1) or before (-1) ``day``, within
    MAX_ROLL_DAYS and, given ``month``, within that month; else None."""
    step = timedelta(days=direction)
    for _ in range(MAX_ROLL_DAYS):
        try:
            day += step
        except OverflowError:
            return None
        if month is not None and day.month != month:
            return None
        if is_business_day(day, weekend, holidays, dates):
            return day
    return None
