"""Calendar rules: an RFC 5545 RRULE from a DTSTART in a zone, with EXDATE, RDATE, business days
and 29 February anniversaries, expanded to UTC instants.

The calendar arithmetic happens on the wall clock, as RFC 5545 says (python-dateutil's
``rrule``: "the last weekday of the month" is a date, whatever the offset). Each wall time is
then resolved by :mod:`duetime.timemath.tzmath` with the schedule's DST policy:

* ``on_gap="run_after"`` (the default, RFC 5545 §3.3.5): a time in a spring-forward gap is read
  with the offset in force before the gap (02:30 on 2025-03-09 in New York fires at 03:30 EDT);
  ``on_gap="skip"`` drops it.
* ``on_overlap="once"`` (the default, RFC 5545): a repeated time fires at its first occurrence;
  ``on_overlap="both"`` at both.

UNTIL ends the rule's own occurrences: in UTC when it ends in ``Z`` (RFC 5545: the form it
takes when DTSTART has a zone), else on the wall clock. COUNT counts the rule's occurrences
before EXDATE, business-day skips and DST skips remove any. RDATEs are added as given. An
occurrence on a non-business day (``roll``), an RDATE's too, is skipped or moved to the next /
previous business day at the same wall time (``modified_*``: the one that keeps it in its
month); a backward roll may move the first one before DTSTART, and it fires there. A plain
yearly rule on 29 February fires in common years on 28 February (``feb29="feb28"``, the
default: the day most people celebrate), on 1 March (``"mar1"``) or not at all (``"skip"``,
RFC 5545's own reading); COUNT counts those stand-ins.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from duetime.errors import InvalidInput, InvalidRrule
from duetime.timemath.recurrence.budget import (
    MAX_STEPS,
    ExpansionBudget,
    costly_part,
    creation_budget,
    sized,
    spending,
)
from duetime.timemath.recurrence.business import (
    check_dates,
    check_holidays,
    check_roll,
    check_weekend,
)
from duetime.timemath.recurrence.calendar_record import CALENDAR_FIELDS as CALENDAR_FIELDS
from duetime.timemath.recurrence.calendar_record import FEB29 as FEB29
from duetime.timemath.recurrence.calendar_record import Calendar as Calendar
from duetime.timemath.recurrence.calendar_record import Feb29 as Feb29
from duetime.timemath.recurrence.calendar_record import calendar_fields as calendar_fields
from duetime.timemath.recurrence.calendar_record import calendar_of as calendar_of
from duetime.timemath.recurrence.calendar_record import calendar_text as calendar_text
from duetime.timemath.recurrence.calendar_record import rule_parts
from duetime.timemath.recurrence.calendar_walls import anniversary as anniversary
from duetime.timemath.recurrence.calendar_walls import calendar_instants as calendar_instants
from duetime.timemath.recurrence.calendar_walls import calendar_walls as calendar_walls
from duetime.timemath.recurrence.calendar_walls import drop_allowance as drop_allowance
from duetime.timemath.recurrence.calendar_walls import earliest_wall as earliest_wall
from duetime.timemath.recurrence.calendar_walls import rule_walls as rule_walls
from duetime.timemath.recurrence.day_filter import (
    RULE_SEARCH_YEARS,
    day_filter_key,
    day_parts,
    some_day_matches,
)
from duetime.timemath.recurrence.periods import ever_fires
from duetime.timemath.recurrence.rrule_text import parse_rrule
from duetime.timemath.recurrence.skips import MAX_DROPPED, crowded
from duetime.timemath.tzmath import to_utc

_UTC_ZONE = ZoneInfo("UTC")
_MAX_DATES = 1000
_MAX_TEXT = 64


def parse_local(value: object, field: str) -> datetime:
    """A wall-clock time without an offset (``2027-01-29T17:00``) or a naive datetime."""
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str) and 0 < len(value.strip()) <= _MAX_TEXT:
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError as exc:
            raise InvalidInput(
                field, f"{value!r} is not a local time such as '2027-01-29T17:00'"
            ) from exc
    else:
        raise InvalidInput(field, "must be a local time such as '2027-01-29T17:00'")
    if parsed.tzinfo is not None:
        raise InvalidInput(
            field, "must be a local wall-clock time without an offset; the zone is 'timezone'"
        )
    return parsed.replace(microsecond=0, fold=0)


def parse_calendar(
    *,
    rrule: object,
    dtstart: object,
    zone: ZoneInfo,
    exdates: object = None,
    rdates: object = None,
    holidays: object = None,
    holiday_dates: object = None,
    weekend: object = None,
    roll: object = None,
    feb29: object = "feb28",
) -> Calendar:
    """Check every field (errors name it; a bad rule names its part) and build the Calendar."""
    # A batch of per-user schedules repeats a few rule texts: each is parsed once (a bad one is
    # parsed, and refused, every time: the cache keeps only rules that pass).
    parts = rule_parts(rrule) if isinstance(rrule, str) else parse_rrule(rrule)
    if dtstart is None:
        raise InvalidInput(
            "dtstart", "is required with rrule (a local time, e.g. 2027-01-29T17:00)"
        )
    start = parse_local(dtstart, "dtstart")
    calendar = Calendar(
        rrule=parts.text,
        dtstart=start,
        exdates=_locals(exdates, "exdates"),
        rdates=_locals(rdates, "rdates"),
        holidays=check_holidays(holidays),
        holiday_dates=check_dates(holiday_dates, "holiday_dates"),
        weekend=check_weekend(weekend),
        roll=check_roll(roll),
        feb29=_feb29(feb29),
    )
    if calendar.roll is None and (calendar.holidays or calendar.holiday_dates):
        calendar = replace(calendar, roll="skip")
    until = parts.until
    if until is not None:
        limit = until.value if not until.utc else until.value.replace(tzinfo=UTC)
        first = start if not until.utc else to_utc(start, zone)
        if (until.is_date and limit.date() < start.date()) or (not until.is_date and limit < first):
            raise InvalidRrule("rrule", "UNTIL: is before DTSTART: the rule has no occurrence")
    # Deciding that a rule never fires walks a century of its days: the whole budget.
    with spending(ExpansionBudget(field="rrule", part=costly_part(parts))):
        _check_fires(calendar)
    return calendar


def _feb29(value: object) -> Feb29:
    for choice in FEB29:
        if value == choice:
            return choice
    raise InvalidInput("feb29", f"must be one of {', '.join(map(repr, FEB29))}, not {value!r}")


def _locals(value: object, field: str) -> tuple[datetime, ...]:
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise InvalidInput(field, "must be a list of local times such as '2027-12-24T17:00'")
    if len(value) > _MAX_DATES:
        raise InvalidInput(field, f"{len(value)} times; at most {_MAX_DATES}")
    return tuple(sorted({parse_local(item, field) for item in value}))


@functools.lru_cache(maxsize=4096)
def _check_fires(calendar: Calendar) -> None:
    """Refuse a rule whose dates can never match within RULE_SEARCH_YEARS (30 February...).

    dateutil walks a rule that never matches period by period up to year 9999 (for a SECONDLY rule,
    for ever): checking which *days* its BYxxx parts allow is a cheap, necessary condition, and
    :func:`~duetime.timemath.recurrence.periods.ever_fires` decides the rest (BYSETPOS beyond a
    period's size, a 5th Monday on the 1st, an INTERVAL out of phase) in bounded time.

    Wall times alone, no zone: a rule given in a hundred zones is checked once (only a rule
    that passes is remembered; one refused is checked, and refused, again).
    """
    parts = calendar.parts
    if calendar.rdates:
        # The rule alone may never fire: walked for the skip check only when it can.
        can_fire = some_day_matches(calendar.dtstart.date(), day_filter_key(parts))
        if calendar.roll == "skip" and can_fire and ever_fires(parts, calendar.dtstart):
            _check_skips(calendar)
        return
    if not some_day_matches(calendar.dtstart.date(), day_filter_key(parts)):
        raise InvalidRrule(
            "rrule",
            f"{day_parts(parts)}: no day matches within {RULE_SEARCH_YEARS} years of DTSTART: "
            "the rule never fires",
        )
    if not ever_fires(parts, calendar.dtstart) or _first_wall(calendar) is None:
        raise InvalidRrule(
            "rrule", f"{parts.text}: no occurrence within {RULE_SEARCH_YEARS} years of DTSTART"
        )
    if calendar.roll == "skip":
        # Runs of too many drops first: a lookup stops after MAX_DROPPED of them, so the first
        # business occurrence of such a rule is not found, and "none" would misstate why.
        _check_skips(calendar)
    if calendar.roll == "skip" and _first_business(calendar) is None:
        raise InvalidInput(
            "roll", f"skip drops every occurrence of {parts.text}: none is on a business day"
        )


def _check_skips(calendar: Calendar) -> None:
    """Refuse a rule that ``roll=skip`` would stop for good at a run of non-business days: a
    lookup drops at most MAX_DROPPED occurrences in a row (see
    :mod:`~duetime.timemath.recurrence.skips`)."""
    parts = calendar.parts
    uncounted = calendar
    if parts.count is not None:
        if parts.count <= MAX_DROPPED:
            return
        text = ";".join(p for p in parts.text.split(";") if not p.startswith("COUNT="))
        uncounted = replace(calendar, rrule=text)
    # Its own budget, naming roll: the walk must reach a run's MAX_DROPPED + 1st occurrence to
    # say which run a lookup would stop at, and it stays bounded however the rule is made.
    with spending(sized(MAX_STEPS + drop_allowance(calendar), "roll", "skip")):
        why = crowded(
            parts,
            calendar.dtstart,
            calendar.weekend,
            calendar.holidays,
            calendar.holiday_dates,
            lambda near: rule_walls(uncounted, near),
        )
    if why is not None:
        raise InvalidInput("roll", why)


def _first_business(calendar: Calendar) -> datetime | None:
    """The first wall time left after ``roll=skip``; a walk over too many skipped ones is
    refused as ``roll``'s fault."""
    with spending(creation_budget("roll", "skip", drop_allowance(calendar))):
        return next(calendar_walls(calendar, _UTC_ZONE), None)


def _first_wall(calendar: Calendar) -> datetime | None:
    for wall in rule_walls(calendar):
        return wall
    for wall in calendar.rdates:
        return wall
    return None
