"""The user's "when" (at / delay / local / date) as one UTC instant; errors name the field.

The local and date forms keep their wall-clock time and zone name next to the instant, so that
when the tz database changes a zone's rules, :func:`reresolve` can keep "09:00 local" at 09:00.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import date as calendar_date
from datetime import datetime, timedelta

from duetime.errors import InvalidInput
from duetime.timemath.bounds import check_instant, check_year
from duetime.timemath.durations import add_duration, parse_duration
from duetime.timemath.tzmath import is_aware, load_zone, parse_disambiguation, stored_zone, to_utc

__all__ = ["When", "check_day_exists", "parse_at", "reresolve", "resolve_when"]
_MAX_TEXT = 64

_LOCAL = re.compile(
    r"(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})[T ]"
    r"(?P<hour>\d{2}):(?P<minute>\d{2})(?::(?P<second>\d{2})(?:\.(?P<fraction>\d{1,6}))?)?"
)
_DATE = re.compile(r"(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})")
_HAS_OFFSET = re.compile(r"(?:Z|[+-]\d{2}(?::?\d{2})?)$", re.IGNORECASE)
_FORMS = ("at", "delay", "local", "date")


@dataclass(frozen=True, slots=True)
class When:
    """A resolved due time, plus the wall time and zone it came from when the user gave one."""

    due_at: datetime
    local: datetime | None
    timezone: str | None
    disambiguation: str


def resolve_when(
    *,
    now: datetime,
    at: str | datetime | None = None,
    delay: str | int | float | timedelta | None = None,
    local: str | datetime | None = None,
    date: str | calendar_date | None = None,
    timezone: str | None = None,
    disambiguation: str = "compatible",
) -> When:
    """Turn exactly one of at / delay / local / date into a UTC due time, or name the bad field.

    ``timezone`` is ignored by ``at`` (the offset already names the instant) but still validated,
    so a typo is reported rather than silently dropped. With ``delay`` it only matters for
    calendar durations (``P15D``, ``P1M``), which then keep the wall-clock time in that zone.
    """
    if not is_aware(now):
        raise ValueError("resolve_when needs a timezone-aware now (ask the Clock)")
    forms = (at, delay, local, date)
    if forms.count(None) != 3:
        _check_exactly_one(forms)
    choice = parse_disambiguation(disambiguation)
    zone = load_zone(timezone) if timezone is not None else None
    if at is not None:
        return When(parse_at(at), None, None, choice)
    if delay is not None:
        duration = parse_duration(delay, "delay")
        due_at = add_duration(now, duration, zone, choice, "delay")
        return When(check_instant(due_at, "delay"), None, timezone, choice)
    if local is not None:
        if timezone is None or zone is None:
            raise InvalidInput(
                "timezone", "is required with local= (an IANA name such as 'Asia/Tokyo')"
            )
        wall = _parse_local(local)
        due_at = check_instant(to_utc(wall, zone, choice, "local"), "local")
        return When(due_at, wall, timezone, choice)
    assert date is not None  # _check_exactly_one guarantees one form
    name = timezone if timezone is not None else "UTC"
    wall = _parse_date(date)
    due_at = to_utc(wall, zone or load_zone(name), choice, "date")
    return When(check_instant(due_at, "date"), wall, name, choice)


def reresolve(when: When) -> When:
    """Recompute ``due_at`` from the stored wall time and zone, after the tz rules changed."""
    if when.local is None or when.timezone is None:
        return when
    choice = parse_disambiguation(when.disambiguation)
    zone = stored_zone(when.timezone)
    due_at = to_utc(when.local, zone, choice, "local")
    if due_at == when.due_at:
        return when
    return replace(when, due_at=due_at)


def _check_exactly_one(forms: tuple[object, ...]) -> None:
    """One form only (at, delay, local, date, in that order): two of them could disagree, and
    guessing which one was meant loses data."""
    given = [name for name, form in zip(_FORMS, forms, strict=True) if form is not None]
    if not given:
        raise InvalidInput("at", "one of at, delay, local or date is required")
    if len(given) > 1:
        raise InvalidInput(
            given[1],
            f"{given[0]} and {given[1]} are exclusive: give only one of at, delay, local or date",
        )


def parse_at(value: str | datetime) -> datetime:
    """An instant: ISO 8601 with an offset or 'Z', or an aware datetime; naive is refused."""
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        text = value.strip()
        if not text:
            raise InvalidInput("at", "must not be empty; give e.g. '2025-03-15T13:00:00Z'")
        if len(text) > _MAX_TEXT:
            raise InvalidInput("at", "is too long to be an ISO 8601 timestamp")
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError as exc:
            check_day_exists(text, value, "at")
            raise InvalidInput(
                "at", f"{value!r} is not an ISO 8601 timestamp such as '2025-03-15T13:00:00Z'"
            ) from exc
        check_year(parsed.year, "at")
    else:
        raise InvalidInput(
            "at", f"must be an ISO 8601 string or an aware datetime, not {type(value).__name__}"
        )
    if not is_aware(parsed):
        raise InvalidInput(
            "at", f"{value!s} has no UTC offset; add one or use local= with timezone="
        )
    return check_instant(parsed, "at")


def check_day_exists(text: str, value: object, field: str) -> None:
    """A timestamp that reads well but names a day the calendar lacks (2025-02-29) says so."""
    match = _DATE.match(text)
    if match is None:
        return
    check_year(int(match["year"]), field)
    try:
        calendar_date(int(match["year"]), int(match["month"]), int(match["day"]))
    except ValueError as exc:
        raise InvalidInput(field, f"{value!r} does not exist: {exc}") from exc


def _parse_local(value: str | datetime) -> datetime:
    """A wall-clock time: 'YYYY-MM-DDTHH:MM[:SS[.ffffff]]' or a naive datetime, no offset."""
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            raise InvalidInput(
                "local", "must be a naive wall-clock time; use at= for an aware datetime"
            )
        check_year(value.year, "local")
        return value.replace(fold=0)
    if not isinstance(value, str):
        raise InvalidInput(
            "local", f"must be an ISO 8601 wall-clock time string, not {type(value).__name__}"
        )
    text = value.strip()
    match = _LOCAL.fullmatch(text) if len(text) <= _MAX_TEXT else None
    if match is None:
        if _LOCAL.match(text) and _HAS_OFFSET.search(text):
            raise InvalidInput(
                "local", f"{value!r} has a UTC offset; drop it (the zone is timezone=) or use at="
            )
        raise InvalidInput(
            "local",
            f"{value!r} is not a wall-clock time like '2025-03-15T09:00' or '2025-03-15T09:00:30'",
        )
    parts = match.groupdict()
    check_year(int(parts["year"]), "local")
    fraction = (parts["fraction"] or "").ljust(6, "0")
    try:
        return datetime(
            int(parts["year"]),
            int(parts["month"]),
            int(parts["day"]),
            int(parts["hour"]),
            int(parts["minute"]),
            int(parts["second"] or 0),
            int(fraction),
        )
    except ValueError as exc:
        raise InvalidInput("local", f"{value!r} does not exist: {exc}") from exc


def _parse_date(value: str | calendar_date) -> datetime:
    """A calendar day, meaning 00:00 on that day."""
    if isinstance(value, datetime):
        raise InvalidInput("date", "must be a date; use local= for a time of day")
    if isinstance(value, calendar_date):
        day = value
    elif isinstance(value, str):
        text = value.strip()
        match = _DATE.fullmatch(text)
        if match is None:
            raise InvalidInput("date", f"{value!r} is not a date like '2025-03-15'")
        check_year(int(match["year"]), "date")
        try:
            day = calendar_date(int(match["year"]), int(match["month"]), int(match["day"]))
        except ValueError as exc:
            raise InvalidInput("date", f"{value!r} does not exist: {exc}") from exc
    else:
        raise InvalidInput("date", f"must be a 'YYYY-MM-DD' string, not {type(value).__name__}")
    check_year(day.year, "date")
    return datetime(day.year, day.month, day.day)
