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
import heapq
import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from typing import Any, Literal, get_args
from zoneinfo import ZoneInfo

from dateutil import rrule as du

from duetime.errors import InvalidInput, InvalidRrule
from duetime.timemath.recurrence.budget import (
    DROP_STEPS,
    MAX_STEPS,
    RESOLVE_STEPS,
    WALL_STEPS,
    ExpansionBudget,
    charge,
    costly_part,
    creation_budget,
    metered,
    sized,
    spending,
)
from duetime.timemath.recurrence.business import (
    DEFAULT_WEEKEND,
    MAX_ROLL_DAYS,
    WEEKDAY_NAMES,
    Roll,
    business_day,
    check_dates,
    check_holidays,
    check_roll,
    check_weekend,
    rolls_backward,
    rolls_forward,
)
from duetime.timemath.recurrence.cron import walk_start
from duetime.timemath.recurrence.day_filter import (
    RULE_SEARCH_YEARS,
    day_filter_key,
    day_parts,
    some_day_matches,
)
from duetime.timemath.recurrence.periods import (
    ever_fires,
    period_start,
    resumed,
    whole_first_period,
)
from duetime.timemath.recurrence.rrule_text import RuleParts, parse_rrule
from duetime.timemath.recurrence.skips import MAX_DROPPED, crowded
from duetime.timemath.tzmath import classify, to_utc

Feb29 = Literal["feb28", "mar1", "skip"]
FEB29: tuple[Feb29, ...] = get_args(Feb29)
_UTC_ZONE = ZoneInfo("UTC")
_MAX_DATES = 1000
_MAX_TEXT = 64


@dataclass(frozen=True, slots=True)
class Calendar:
    """A checked calendar rule; build it with :func:`parse_calendar`. Wall times are naive."""

    rrule: str
    dtstart: datetime
    exdates: tuple[datetime, ...] = ()
    rdates: tuple[datetime, ...] = ()
    holidays: str | None = None
    holiday_dates: tuple[date, ...] = ()
    weekend: tuple[int, ...] = DEFAULT_WEEKEND
    roll: Roll | None = None
    feb29: Feb29 = "feb28"

    @property
    def parts(self) -> RuleParts:
        return _parts(self.rrule)

    def to_dict(self) -> dict[str, Any]:
        """The JSON view: what ``add_schedule`` takes back (local times without an offset)."""
        return {
            "rrule": self.rrule,
            "dtstart": self.dtstart.isoformat(),
            "exdates": [d.isoformat() for d in self.exdates],
            "rdates": [d.isoformat() for d in self.rdates],
            "holidays": self.holidays,
            "holiday_dates": [d.isoformat() for d in self.holiday_dates],
            "weekend": [WEEKDAY_NAMES[d] for d in self.weekend],
            "roll": self.roll,
            "feb29": self.feb29,
        }

    def to_text(self) -> str:
        """How the stores keep it (one text column): compact JSON without the fields that hold
        their defaults (a per-user rule is mostly its RRULE and DTSTART: a smaller row)."""
        kept = {
            name: value
            for name, value in self.to_dict().items()
            if name not in _STORED_DEFAULTS or _STORED_DEFAULTS[name] != value
        }
        return json.dumps(kept, separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_text(cls, text: str) -> Calendar:
        """Read a stored calendar back (it was checked when written)."""
        return _from_text(text)


CALENDAR_FIELDS = (
    "rrule",
    "dtstart",
    "exdates",
    "rdates",
    "holidays",
    "holiday_dates",
    "weekend",
    "roll",
    "feb29",
)
"""What a schedule takes besides ``timezone`` to define a calendar rule."""


def calendar_fields(calendar: Calendar | None) -> dict[str, Any]:
    """A schedule's JSON view of its calendar rule: every field None for cron and interval."""
    if calendar is None:
        return dict.fromkeys(CALENDAR_FIELDS)
    return calendar.to_dict()


def calendar_text(calendar: Calendar | None) -> str | None:
    """A calendar rule as the stores keep it, or None."""
    return None if calendar is None else _text(calendar)


@functools.lru_cache(maxsize=4096)
def _text(calendar: Calendar) -> str:
    """Written once per distinct rule: a batch of per-user schedules shares a few."""
    return calendar.to_text()


def calendar_of(text: str | None) -> Calendar | None:
    """A stored calendar rule read back, or None."""
    return None if text is None else Calendar.from_text(text)


_STORED_DEFAULTS: dict[str, object] = {
    "exdates": [],
    "rdates": [],
    "holidays": None,
    "holiday_dates": [],
    "weekend": [WEEKDAY_NAMES[d] for d in DEFAULT_WEEKEND],
    "roll": None,
    "feb29": "feb28",
}
"""Fields the stored text leaves out when they hold these values (rows written before kept
every field; both read back the same)."""


@functools.lru_cache(maxsize=4096)
def _from_text(text: str) -> Calendar:
    data = {**_STORED_DEFAULTS, **json.loads(text)}
    return Calendar(
        rrule=data["rrule"],
        dtstart=datetime.fromisoformat(data["dtstart"]),
        exdates=tuple(datetime.fromisoformat(d) for d in data["exdates"]),
        rdates=tuple(datetime.fromisoformat(d) for d in data["rdates"]),
        holidays=data["holidays"],
        holiday_dates=tuple(date.fromisoformat(d) for d in data["holiday_dates"]),
        weekend=tuple(WEEKDAY_NAMES.index(d) for d in data["weekend"]),
        roll=data["roll"],
        feb29=data["feb29"],
    )


@functools.lru_cache(maxsize=4096)
def _parts(text: str) -> RuleParts:
    return parse_rrule(text)


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
    parts = _parts(rrule) if isinstance(rrule, str) else parse_rrule(rrule)
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


def drop_allowance(calendar: Calendar) -> int:
    """Steps an expansion of ``calendar`` is granted besides its budget for the occurrences
    ``roll=skip`` drops: MAX_DROPPED of them in a row (see
    :data:`~duetime.timemath.recurrence.budget.DROP_STEPS`); none without skip."""
    return MAX_DROPPED * DROP_STEPS if calendar.roll == "skip" else 0


def earliest_wall(calendar: Calendar) -> datetime:
    """No wall time of the calendar fires before this one: DTSTART or its first RDATE, less a
    month when a roll may move an occurrence to an earlier day (a backward roll of the first
    occurrence lands before DTSTART, and fires there)."""
    first = min((calendar.dtstart, *calendar.rdates[:1]))
    if rolls_backward(calendar.roll):
        try:
            return first - timedelta(days=MAX_ROLL_DAYS)
        except OverflowError:  # within a month of year 1: no earlier day to roll to
            return first
    return first


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


def rule_walls(calendar: Calendar, near: datetime | None = None) -> Iterator[datetime]:
    """The rule's own wall times in order (DTSTART's when it matches), COUNT applied; UNTIL
    only on the wall clock when it is not in UTC (UTC is compared with the instants).

    With ``near``, every wall time from ``near`` on and maybe some before it: the expansion
    starts at the rule's period that holds ``near`` when that is exact (see
    :mod:`duetime.timemath.recurrence.periods`), so a rule years old is as cheap to ask as a new
    one."""
    parts = calendar.parts
    until = parts.until
    wall_until: datetime | None = None
    if until is not None and not until.utc:
        wall_until = (
            until.value + timedelta(days=1) - timedelta(microseconds=1)
            if until.is_date
            else until.value
        )
    horizon = _years_later(max(calendar.dtstart, near or calendar.dtstart))
    for wall in _expanded(calendar, parts, near):
        if wall_until is not None and wall > wall_until:
            return
        if wall > horizon:
            return
        yield wall
        horizon = _years_later(wall)


def _expanded(calendar: Calendar, parts: RuleParts, near: datetime | None) -> Iterator[datetime]:
    start = calendar.dtstart
    if parts.plain_yearly and start.month == 2 and start.day == 29 and calendar.feb29 != "skip":
        yield from _leap_anniversaries(start, parts, calendar.feb29)
        return
    rule: du.rrule | None = None
    whole: du.rrule | None = None
    try:
        if near is not None and near > start:
            rule = _resumed_rule(parts.text, start, period_start(parts, start, near))
        whole = _whole_first_period(parts.text, start) if rule is None else None
        if rule is None and whole is None:
            rule = _dateutil_rule(parts.text, start)
    except ValueError:  # dateutil: an INTERVAL that BYHOUR/BYMINUTE/BYSECOND never meets
        return
    if whole is not None:
        yield from _from_dtstart(_dateutil(whole), start, parts.count)
        return
    assert rule is not None
    yield from _dateutil(rule)


@functools.lru_cache(maxsize=4096)
def _dateutil_rule(text: str, start: datetime) -> du.rrule:
    return metered(_parts(text).dateutil_rule(start))


@functools.lru_cache(maxsize=4096)
def _resumed_rule(text: str, start: datetime, period: datetime) -> du.rrule | None:
    """Made once per rule and period: schedules alike share it within a materialiser round."""
    rule = resumed(_parts(text), start, period)
    return None if rule is None else metered(rule)


@functools.lru_cache(maxsize=4096)
def _whole_first_period(text: str, start: datetime) -> du.rrule | None:
    rule = whole_first_period(_parts(text), start)
    return None if rule is None else metered(rule)


def _from_dtstart(
    walls: Iterator[datetime], start: datetime, count: int | None
) -> Iterator[datetime]:
    """The walls from DTSTART on, COUNT of them at most: BYSETPOS's picks of the first period
    that fall before DTSTART (one per BYSETPOS value at most) neither fire nor count."""
    made = 0
    for wall in walls:
        if wall < start:
            continue
        yield wall
        made += 1
        if count is not None and made >= count:
            return


def _dateutil(rule: du.rrule) -> Iterator[datetime]:
    """The rule's wall times, one step of the active expansion budget each."""
    try:
        for wall in rule:
            charge(WALL_STEPS)
            yield wall
    except (OverflowError, ValueError):  # walked off the end of the calendar (year 9999)
        return


def anniversary(day: date, year: int, feb29: Feb29 = "feb28") -> date | None:
    """``day``'s anniversary in ``year``: 29 February in a common year is 28 February, 1 March
    or none, as ``feb29`` says (a yearly schedule's rule, also for chains of one-shot timers)."""
    try:
        return day.replace(year=year)
    except ValueError:
        if feb29 == "skip":
            return None
        return date(year, 2, 28) if feb29 == "feb28" else date(year, 3, 1)


def _leap_anniversaries(start: datetime, parts: RuleParts, feb29: Feb29) -> Iterator[datetime]:
    """29 February in leap years; 28 February or 1 March in the others (COUNT counts both)."""
    made = 0
    year = start.year
    while year <= 9999:
        day = anniversary(start.date(), year, feb29)
        assert day is not None  # feb29 is not "skip" here
        yield datetime.combine(day, start.time())
        made += 1
        if parts.count is not None and made >= parts.count:
            return
        year += parts.interval


def _years_later(wall: datetime) -> datetime:
    try:
        return wall + timedelta(days=366 * RULE_SEARCH_YEARS)
    except OverflowError:
        return datetime.max


def calendar_walls(
    calendar: Calendar, zone: ZoneInfo, near: datetime | None = None
) -> Iterator[datetime]:
    """Every wall time that fires, in order: the rule's (UNTIL in UTC applied) and the RDATEs,
    each on a business day (or dropped) when ``roll`` says so; an EXDATE removes an occurrence
    named by its own time or by the time it was rolled to. With ``near``, from some wall time
    at least a roll before ``near`` on (see :func:`rule_walls`)."""
    until = calendar.parts.until
    until_at = until.value.replace(tzinfo=UTC) if until is not None and until.utc else None
    own = rule_walls(calendar, near)
    if until_at is not None:
        own = _until_utc(own, zone, until_at)
    excluded = set(calendar.exdates)
    last: datetime | None = None
    dropped = 0
    for wall in heapq.merge(own, calendar.rdates):
        if wall in excluded:
            continue
        if calendar.roll is not None:
            charge(WALL_STEPS)  # a business-day check costs about what making the wall did
            day = business_day(
                wall.date(),
                calendar.roll,
                calendar.weekend,
                calendar.holidays,
                calendar.holiday_dates,
            )
            if day is None:
                dropped += 1
                if dropped > MAX_DROPPED:  # every one falls on a non-business day: none fire
                    return
                continue
            dropped = 0
            wall = datetime.combine(day, wall.time())
            if wall in excluded:  # the rolled time is what users see, and may exclude
                continue
        if last is not None and wall <= last:
            continue  # rolled onto (or before) one already made: one firing
        last = wall
        yield wall


def _until_utc(walls: Iterator[datetime], zone: ZoneInfo, until_at: datetime) -> Iterator[datetime]:
    for wall in walls:
        if to_utc(wall, zone, "compatible") > until_at:
            return
        yield wall


def calendar_instants(
    calendar: Calendar,
    zone: ZoneInfo,
    after: datetime,
    on_gap: str = "run_after",
    on_overlap: str = "once",
) -> Iterator[datetime]:
    """Every firing instant (UTC) strictly after the aware ``after``: increasing, no repeats.

    As in the cron engine, each wall time's earliest possible instant bounds every later wall
    time's instant from below, so an instant is given out once some wall time's earliest
    reaches it; a gap time read with the offset before the gap, or a repeated hour's second
    pass, waits in a heap until then.
    """
    after = after.astimezone(UTC)
    # Wall times more than a day (plus a roll) before `after` cannot fire after it: cheap skip.
    margin = timedelta(days=2 + (MAX_ROLL_DAYS if rolls_forward(calendar.roll) else 0))
    skip_before = after.astimezone(zone).replace(tzinfo=None) - margin
    # No rule time before walk_start fires after `after`; one rolled forward may come from a
    # month before, and the dedup of rolled times needs what that one was rolled onto.
    try:
        near: datetime | None = walk_start(after, zone) - (
            timedelta(days=MAX_ROLL_DAYS) if rolls_forward(calendar.roll) else timedelta(0)
        )
    except OverflowError:
        near = None
    pending: list[datetime] = []
    last = after
    for wall in calendar_walls(calendar, zone, near):
        if wall < skip_before:
            continue
        charge(RESOLVE_STEPS)
        kind = classify(wall, zone)
        earliest = to_utc(wall, zone, "earlier")
        if kind == "normal":
            heapq.heappush(pending, earliest)
        elif kind == "overlap":
            heapq.heappush(pending, earliest)
            if on_overlap == "both":
                heapq.heappush(pending, to_utc(wall, zone, "later"))
        elif on_gap != "skip":
            heapq.heappush(pending, to_utc(wall, zone, "compatible"))
        while pending and pending[0] <= earliest:
            instant = heapq.heappop(pending)
            if instant > last:
                last = instant
                yield instant
    while pending:
        instant = heapq.heappop(pending)
        if instant > last:
            last = instant
            yield instant
