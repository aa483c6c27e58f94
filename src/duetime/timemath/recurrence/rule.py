"""The :class:`Recurrence` value and its validation, so every mistake names its field."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal, TypeVar, get_args
from zoneinfo import ZoneInfo

from cronsim import CronSim, CronSimError

from duetime.errors import InvalidCron, InvalidInput
from duetime.timemath.durations import parse_duration
from duetime.timemath.recurrence.budget import ExpansionBudget, bounded
from duetime.timemath.recurrence.calendar import Calendar, parse_calendar
from duetime.timemath.recurrence.cost import check_calendar_cost
from duetime.timemath.recurrence.cron import (
    CRON_SEARCH_YEARS,
    OnGap,
    OnOverlap,
    cron_instants,
    is_fixed_time,
)
from duetime.timemath.tzmath import is_aware, load_zone, stored_zone

CatchUpPolicy = Literal["latest", "all", "none"]

ON_GAP: tuple[OnGap, ...] = get_args(OnGap)
ON_OVERLAP: tuple[OnOverlap, ...] = get_args(OnOverlap)
CATCH_UP: tuple[CatchUpPolicy, ...] = get_args(CatchUpPolicy)

#: The common nicknames, as cronie expands them (``@reboot`` is not a time and is refused).
CRON_ALIASES: dict[str, str] = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

MIN_EVERY = timedelta(seconds=1)
_MAX_CRON_TEXT = 256
_TINY = timedelta(microseconds=1)
_T = TypeVar("_T", bound=str)


@dataclass(frozen=True, slots=True)
class Recurrence:
    """A validated rule; build it with :func:`parse_recurrence`.

    Exactly one of ``cron`` (as written, whitespace collapsed, an alias kept in lower case),
    ``every`` and ``calendar`` (an RFC 5545 rule) is set. ``start_at``/``end_at`` are UTC and
    inclusive. ``on_gap``/``on_overlap`` change fixed-time cron jobs and calendar rules.
    """

    cron: str | None
    every: timedelta | None
    timezone: str = "UTC"
    on_gap: OnGap = "run_after"
    on_overlap: OnOverlap = "once"
    start_at: datetime | None = None
    end_at: datetime | None = None
    calendar: Calendar | None = None

    @property
    def kind(self) -> Literal["cron", "interval", "calendar"]:
        if self.calendar is not None:
            return "calendar"
        return "cron" if self.cron is not None else "interval"

    @property
    def expression(self) -> str:
        """The 5-field expression the cron engine evaluates (an alias expanded)."""
        if self.cron is None:
            raise ValueError("an interval recurrence has no cron expression")
        return CRON_ALIASES.get(self.cron.lower(), self.cron)

    @property
    def fixed_time(self) -> bool:
        """True for a cronie *fixed-time* job: neither minute nor hour starts with ``*``."""
        return self.cron is not None and is_fixed_time(self.expression)

    @property
    def zone(self) -> ZoneInfo:
        return stored_zone(self.timezone)


def parse_recurrence(
    *,
    cron: str | None = None,
    every: str | timedelta | int | float | None = None,
    timezone: str = "UTC",
    on_gap: str = "run_after",
    on_overlap: str = "once",
    start_at: datetime | None = None,
    end_at: datetime | None = None,
    now: datetime | None = None,
    rrule: str | None = None,
    calendar: Mapping[str, object] | None = None,
) -> Recurrence:
    """Check a user's rule and build the :class:`Recurrence`.

    ``every`` is real elapsed time: ISO 8601 (``PT90M``; days and weeks count 24 hours each;
    months and years are refused), seconds, or a timedelta; at least one second. A cron
    expression has 5 fields or is an alias (``@daily``...). One that can never fire
    (``0 0 30 2 *``, or a wildcard job whose every match falls in a DST gap) is refused: it must
    fire within ``CRON_SEARCH_YEARS`` after ``start_at`` (else ``now``, else the current time).
    An ``rrule`` takes its DTSTART, EXDATEs, RDATEs, business days and 29 February policy from
    ``calendar`` (see :func:`duetime.timemath.recurrence.calendar.parse_calendar`).
    """
    given = [
        name
        for name, value in (("cron", cron), ("every", every), ("rrule", rrule))
        if value is not None
    ]
    if not given:
        raise InvalidInput("cron", "give one of cron, every or rrule")
    if len(given) > 1:
        raise InvalidInput(given[1], f"give only one of cron, every or rrule, not {given[0]} too")
    zone = load_zone(timezone, "timezone")
    gap = _choice(on_gap, ON_GAP, "on_gap")
    overlap = _choice(on_overlap, ON_OVERLAP, "on_overlap")
    start = _instant(start_at, "start_at")
    end = _instant(end_at, "end_at")
    if start is not None and end is not None and end < start:
        raise InvalidInput("end_at", "must not be before start_at")
    if every is not None:
        return Recurrence(None, _parse_every(every), timezone, gap, overlap, start, end)
    reference = start - _TINY if start is not None else _instant(now, "now")
    if reference is None:
        reference = datetime.now(UTC)
    if rrule is not None:
        cal = parse_calendar(rrule=rrule, zone=zone, **dict(calendar or {}))
        check_calendar_cost(cal, zone, reference, gap, overlap)
        return Recurrence(None, None, timezone, gap, overlap, start, end, cal)
    rec = Recurrence(_parse_cron_text(cron), None, timezone, gap, overlap, start, end)
    # Deciding that a rule never fires walks its whole horizon: the whole budget, not a share.
    instants = bounded(
        cron_instants(rec.expression, rec.zone, reference, gap, overlap),
        ExpansionBudget(field="cron", part=""),
    )
    if next(instants, None) is None:
        raise InvalidCron(
            "cron",
            f"{rec.cron!r} never fires in {timezone}: no match within {CRON_SEARCH_YEARS} years, "
            "or every match falls in a DST gap",
        )
    return rec


def parse_catch_up(value: object, field: str = "catch_up") -> CatchUpPolicy:
    """Check a catch-up policy name: ``latest`` (the default), ``all`` or ``none``."""
    return _choice(value, CATCH_UP, field)


def _choice(value: object, allowed: tuple[_T, ...], field: str) -> _T:
    for choice in allowed:
        if value == choice:
            return choice
    names = ", ".join(repr(c) for c in allowed)
    raise InvalidInput(field, f"must be one of {names}, not {value!r}")


def _instant(value: object, field: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise InvalidInput(field, f"must be a datetime, not {type(value).__name__}")
    if not is_aware(value):
        raise InvalidInput(field, "must be timezone-aware; a naive datetime names no instant")
    return value.astimezone(UTC)


def _parse_every(value: object) -> timedelta:
    if not isinstance(value, str | int | float | timedelta) or isinstance(value, bool):
        raise InvalidInput(
            "every",
            f"must be an ISO 8601 duration, seconds or a timedelta, not {type(value).__name__}",
        )
    duration = parse_duration(value, "every")
    if duration.months:
        raise InvalidInput(
            "every", "months and years have no fixed length; use a cron expression instead"
        )
    # Days and weeks count as 24 real hours each: an interval is elapsed time.
    step = timedelta(days=duration.days) + duration.clock
    if step < MIN_EVERY:
        raise InvalidInput("every", "must be at least 1 second")
    return step


def _parse_cron_text(value: object) -> str:
    if not isinstance(value, str):
        raise InvalidCron("cron", f"must be a string, not {type(value).__name__}")
    if len(value) > _MAX_CRON_TEXT:
        raise InvalidCron("cron", "is too long to be a cron expression")
    text = " ".join(value.split())
    if not text:
        raise InvalidCron("cron", "must not be empty")
    if text.startswith("@"):
        if text.lower() not in CRON_ALIASES:
            names = ", ".join(CRON_ALIASES)
            raise InvalidCron("cron", f"unknown alias {text!r}; use one of {names}")
        return text.lower()
    fields = text.split(" ")
    if len(fields) != 5:
        raise InvalidCron(
            "cron",
            f"{text!r} has {len(fields)} fields; expected 5 "
            "(minute hour day-of-month month day-of-week) or an alias such as @daily",
        )
    try:
        first = next(CronSim(text, datetime(2000, 1, 1)), None)
    except CronSimError as exc:
        raise InvalidCron("cron", f"{text!r}: {exc}") from exc
    except (ValueError, IndexError, TypeError, AssertionError, OverflowError) as exc:
        raise InvalidCron("cron", f"{text!r} is not a valid cron expression") from exc
    if first is None:
        raise InvalidCron("cron", f"{text!r} never matches any date")
    return text
