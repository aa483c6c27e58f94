"""Schedules as data: a caller's request, its validation, and what the stores write.

A :class:`ScheduleRequest` is what every interface builds (Python API, CLI, REST); resolving it
validates every field (errors name the field) and computes the first occurrence. What a change
does to a stored schedule is :mod:`duetime.revisions`'.
"""

from __future__ import annotations

import contextlib
import enum
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields, replace
from datetime import date, datetime, timedelta
from typing import Any, Literal, cast

from duetime.errors import InvalidInput, InvalidRrule
from duetime.model import JSON, Schedule, iso
from duetime.model.schedules import DueSchedule
from duetime.model.schedules import Materialized as Materialized
from duetime.model.schedules import NewSchedule as NewSchedule
from duetime.model.schedules import ScheduleAdvance as ScheduleAdvance
from duetime.model.schedules import ScheduleFilter as ScheduleFilter
from duetime.model.schedules import schedule_from_new as schedule_from_new
from duetime.schedule_bodies import SCHEDULE_REQUEST_BODY
from duetime.timemath.bounds import check_instant
from duetime.timemath.recurrence import (
    OnGap,
    OnOverlap,
    Recurrence,
    next_after,
    parse_catch_up,
    parse_recurrence,
)
from duetime.timemath.recurrence.calendar import CALENDAR_FIELDS, Calendar
from duetime.timemath.recurrence.overlap import (
    DEFAULT_CATCH_UP_GRACE,
    parse_catch_up_grace,
    parse_overlap,
)
from duetime.timemath.tzmath import is_aware
from duetime.timemath.when import check_day_exists
from duetime.validation import (
    check_max_attempts,
    check_payload,
    check_subject,
    check_type,
)

KEY_PREFIX = "schedule:"
MAX_NAME_LENGTH = 200
"""Short enough that ``schedule:<name>:<instant>`` fits the 255 characters of a timer key."""

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:@+=-]*")
_MAX_TEXT = 64

ScheduleAction = Literal["created", "updated", "kept"]
RuleCache = dict[tuple[object, ...], tuple[Recurrence, "datetime | None"]]


class Unset(enum.Enum):
    """The "not given" marker of updates, where None means "clear this field"."""

    UNSET = 0


UNSET = Unset.UNSET

RULE_FIELDS = (
    "cron",
    "every",
    "timezone",
    "start_at",
    "end_at",
    "on_gap",
    "on_overlap",
    "calendar",
)
"""Changing any of these starts the schedule afresh from now."""


def check_schedule_name(value: object, field: str = "name") -> str:
    """Letters, digits and ``_ . : @ + = -``, at most 200: it is part of every timer key."""
    if not isinstance(value, str) or not value:
        raise InvalidInput(field, "a schedule name is required, e.g. 'birthday:user-42'")
    if len(value) > MAX_NAME_LENGTH:
        raise InvalidInput(field, f"is {len(value)} characters; at most {MAX_NAME_LENGTH}")
    if not _NAME.fullmatch(value):
        raise InvalidInput(
            field,
            f"{value[:50]!r} is not a schedule name: letters, digits and _ . : @ + = - "
            "(starting with a letter, digit or '_')",
        )
    return value


def occurrence_key(name: str, instant: datetime) -> str:
    """The idempotency key of one occurrence, e.g. ``schedule:daily:2025-03-09T07:00:00Z``."""
    return f"{occurrence_prefix(name)}{iso(instant)}"


def occurrence_prefix(name: str) -> str:
    """What every occurrence key of schedule ``name`` starts with, before its instant."""
    return f"{KEY_PREFIX}{name}:"


def parse_instant(value: object, field: str) -> datetime | None:
    """An ISO 8601 instant with an offset, or an aware datetime (naive is an error)."""
    if value is None:
        return None
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        text = value.strip()
        if not text or len(text) > _MAX_TEXT:
            raise InvalidInput(field, f"{value!r} is not an ISO 8601 instant")
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError as exc:
            check_day_exists(text, value, field)
            raise InvalidInput(
                field, f"{value!r} is not an ISO 8601 instant such as '2025-03-15T13:00:00Z'"
            ) from exc
    else:
        raise InvalidInput(
            field, f"must be an ISO 8601 string or an aware datetime, not {type(value).__name__}"
        )
    if not is_aware(parsed):
        raise InvalidInput(field, f"{value!s} has no UTC offset; add one, e.g. 'Z'")
    return check_instant(parsed, field)


def recurrence_of(schedule: Schedule | DueSchedule) -> Recurrence:
    """The stored rule as a :class:`Recurrence`; an interval runs on its anchor's grid."""
    start = schedule.start_at
    if start is None and schedule.every is not None:
        start = schedule.anchor_at
    return Recurrence(
        schedule.cron,
        schedule.every,
        schedule.timezone,
        cast(OnGap, schedule.on_gap),
        cast(OnOverlap, schedule.on_overlap),
        start,
        schedule.end_at,
        schedule.calendar,
    )


def _listed(value: object) -> object:
    """A list or tuple given as a tuple (hashable, so a batch's rules are cached); else as is."""
    return tuple(value) if isinstance(value, list) else value


def _hashable(options: dict[str, object] | None) -> object:
    return None if options is None else tuple(options.items())


def _calendar_request(calendar: Calendar | None) -> dict[str, Any]:
    """A stored calendar rule as the request fields that define it again."""
    if calendar is None:
        return {}
    fields = calendar.to_dict()
    return {name: fields[name] for name in CALENDAR_FIELDS}


def anchor_for(now: datetime) -> datetime:
    """An interval's grid without ``start_at``: the first whole second after ``now``."""
    return now.replace(microsecond=0) + timedelta(seconds=1)


@dataclass(frozen=True, slots=True)
class ScheduleRequest:
    """Everything ``add_schedule(...)`` accepts; exactly one of ``cron``, ``every`` and
    ``rrule`` (whose DTSTART, EXDATEs, RDATEs, business days and 29 February policy follow)."""

    name: str
    type: str
    payload: JSON = None
    cron: str | None = None
    every: str | int | float | timedelta | None = None
    timezone: str | None = "UTC"
    subject: str | None = None
    start_at: str | datetime | None = None
    end_at: str | datetime | None = None
    catch_up: str = "latest"
    on_gap: str = "run_after"
    on_overlap: str = "once"
    active: bool = True
    max_attempts: int | None = None
    overlap: str = "allow"
    catch_up_grace: str | int | float | timedelta = DEFAULT_CATCH_UP_GRACE
    rrule: str | None = None
    dtstart: str | datetime | None = None
    exdates: Sequence[str | datetime] | None = None
    rdates: Sequence[str | datetime] | None = None
    holidays: str | None = None
    holiday_dates: Sequence[str | date] | None = None
    weekend: str | Sequence[str] | None = None
    roll: str | None = None
    feb29: str = "feb28"

    def calendar_options(self) -> dict[str, object] | None:
        """What parse_calendar takes besides the rule; None (checked) without an rrule."""
        options: dict[str, object] = {
            "dtstart": self.dtstart,
            "exdates": _listed(self.exdates),
            "rdates": _listed(self.rdates),
            "holidays": self.holidays,
            "holiday_dates": _listed(self.holiday_dates),
            "weekend": _listed(self.weekend),
            "roll": self.roll,
            "feb29": self.feb29,
        }
        if self.rrule is None:
            for name, value in options.items():
                if value is not None and not (name == "feb29" and value == "feb28"):
                    raise InvalidInput(name, "only with rrule (an RFC 5545 recurrence rule)")
            return None
        return options

    @classmethod
    def from_dict(cls, data: Any, field_prefix: str = "") -> ScheduleRequest:
        """Build from JSON (REST bodies, files) as :data:`SCHEDULE_REQUEST_BODY` describes it;
        unknown fields are errors."""
        return cls(**SCHEDULE_REQUEST_BODY.read(data, field_prefix))

    @classmethod
    def of(cls, schedule: Schedule) -> ScheduleRequest:
        """The request that would define ``schedule`` as it is stored."""
        return cls(
            name=schedule.name,
            type=schedule.type,
            payload=schedule.payload,
            cron=schedule.cron,
            every=schedule.every,
            timezone=schedule.timezone,
            subject=schedule.subject,
            start_at=schedule.start_at,
            end_at=schedule.end_at,
            catch_up=schedule.catch_up,
            on_gap=schedule.on_gap,
            on_overlap=schedule.on_overlap,
            active=schedule.active,
            max_attempts=schedule.max_attempts,
            overlap=schedule.overlap,
            catch_up_grace=schedule.catch_up_grace,
            **_calendar_request(schedule.calendar),
        )

    def _rule(
        self, now: datetime, anchor_at: datetime, rules: RuleCache
    ) -> tuple[Recurrence, datetime | None]:
        return _resolve_rule(self, now, anchor_at, rules)

    def resolve(
        self,
        namespace: str,
        now: datetime,
        default_max_attempts: int,
        max_payload_bytes: int,
        *,
        allow_ended: bool = False,
        rules: RuleCache | None = None,
    ) -> NewSchedule:
        """Validate every field and compute the first occurrence after ``now``.

        A rule whose ``end_at`` is past is refused (it would never fire), unless
        ``allow_ended``: an update may end a schedule. ``rules`` remembers rules across one
        batch: a million per-user schedules share a few, resolved at the same ``now``.
        """
        name = check_schedule_name(self.name)
        event_type = check_type(self.type)
        payload = check_payload(self.payload, max_payload_bytes)
        subject = check_subject(self.subject)
        max_attempts = check_max_attempts(
            default_max_attempts if self.max_attempts is None else self.max_attempts
        )
        catch_up = parse_catch_up(self.catch_up)
        overlap = parse_overlap(self.overlap)
        catch_up_grace = parse_catch_up_grace(self.catch_up_grace)
        if not isinstance(self.active, bool):
            raise InvalidInput("active", "must be true or false")
        anchor_at = anchor_for(now)
        rule, next_at = self._rule(now, anchor_at, {} if rules is None else rules)
        if next_at is None and not allow_ended:
            if rule.calendar is not None:
                raise InvalidRrule(
                    "rrule", "has no occurrence after now (COUNT, UNTIL or end_at ended it)"
                )
            raise InvalidInput("end_at", "is past: the schedule has no occurrence after now")
        return NewSchedule(
            namespace=namespace,
            name=name,
            type=event_type,
            payload=payload,
            subject=subject,
            recurrence=rule,
            catch_up=catch_up,
            active=self.active,
            max_attempts=max_attempts,
            anchor_at=anchor_at,
            after_at=now,
            next_at=next_at,
            overlap=overlap,
            catch_up_grace=catch_up_grace,
        )


def prepare_rules(requests: Iterable[ScheduleRequest], now: datetime, rules: RuleCache) -> None:
    """Check each distinct rule of ``requests`` and find its first occurrence after ``now``,
    into ``rules``: run in a thread before a batch is stored, it leaves the rule work (bounded,
    but up to tens of milliseconds a rule) off the event loop and out of the store's
    transaction; resolving the requests then finds each rule here. A bad rule is left for
    resolving to refuse, naming its request."""
    anchor_at = anchor_for(now)
    for request in requests:
        with contextlib.suppress(InvalidInput):
            _resolve_rule(request, now, anchor_at, rules)


def _resolve_rule(
    request: ScheduleRequest, now: datetime, anchor_at: datetime, rules: RuleCache
) -> tuple[Recurrence, datetime | None]:
    options = request.calendar_options()
    key = (
        request.cron,
        request.every,
        request.timezone,
        request.on_gap,
        request.on_overlap,
        request.start_at,
        request.end_at,
        request.rrule,
        _hashable(options),
        now,
    )
    try:
        found = rules.get(key)
    except TypeError:  # an unhashable value: it fails validation below
        found = None
    if found is not None:
        return found
    found = _known_rule(key[:-1], anchor_at, now)
    if found is None:
        rule = parse_recurrence(
            cron=request.cron,
            every=request.every,
            timezone="UTC" if request.timezone is None else request.timezone,
            on_gap=request.on_gap,
            on_overlap=request.on_overlap,
            start_at=parse_instant(request.start_at, "start_at"),
            end_at=parse_instant(request.end_at, "end_at"),
            now=now,
            rrule=request.rrule,
            calendar=options,
        )
        found = rule, first_after(rule, anchor_at, now)
        if request.start_at is None:
            _remember_rule(key[:-1], rule, now, found[1])
    with contextlib.suppress(TypeError):
        rules[key] = found
    return found


_KNOWN_RULES: dict[tuple[object, ...], Recurrence] = {}
"""Rules parsed before, by their fields as given (those without ``start_at``): the batches of
a million per-user schedules share a few rules, and each batch is resolved at its own ``now``,
so a batch's own cache (``RuleCache``) parses every rule again. Bounded: emptied when full."""
_KNOWN_FIRSTS: dict[tuple[object, ...], tuple[datetime, datetime]] = {}
"""For the cron rules of ``_KNOWN_RULES``: an instant and the rule's first occurrence after it.
A cron rule's occurrences are fixed instants, so that occurrence is also the first after any
later instant before it: the next batch, resolved a few milliseconds on, finds it here instead
of walking the cron rule again."""
_KNOWN_RULES_MAX = 4096


def _known_rule(
    fields: tuple[object, ...], anchor_at: datetime, now: datetime
) -> tuple[Recurrence, datetime | None] | None:
    """A rule parsed before, with its first occurrence after ``now``; None to parse it afresh.

    Parsing a cron rule checks that it fires after ``now`` (its ``start_at`` unset): exactly
    when ``first_after`` finds an occurrence, so a rule that finds none is parsed again, to
    refuse it with parsing's own message (or to report its ``end_at`` past).
    """
    try:
        rule = _KNOWN_RULES.get(fields)
    except TypeError:
        return None
    if rule is None:
        return None
    if rule.every is not None:
        return rule, first_after(rule, anchor_at, now)
    known = _KNOWN_FIRSTS.get(fields)
    if known is not None and known[0] <= now < known[1]:
        return rule, known[1]
    first = first_after(rule, anchor_at, now)
    if first is None:
        return None
    _KNOWN_FIRSTS[fields] = (now, first)
    return rule, first


def _remember_rule(
    fields: tuple[object, ...], rule: Recurrence, now: datetime, first: datetime | None
) -> None:
    if len(_KNOWN_RULES) >= _KNOWN_RULES_MAX:
        _KNOWN_RULES.clear()
        _KNOWN_FIRSTS.clear()
    with contextlib.suppress(TypeError):
        _KNOWN_RULES[fields] = rule
        if rule.every is None and first is not None:
            _KNOWN_FIRSTS[fields] = (now, first)


def first_after(rule: Recurrence, anchor_at: datetime, after: datetime) -> datetime | None:
    """The first occurrence after ``after``; an interval without start runs on ``anchor_at``."""
    if rule.every is not None and rule.start_at is None:
        rule = replace(rule, start_at=anchor_at)
    return next_after(rule, after)


if {f.name for f in fields(ScheduleRequest)} != SCHEDULE_REQUEST_BODY.names:  # pragma: no cover
    raise TypeError("SCHEDULE_REQUEST_BODY must describe exactly ScheduleRequest's fields")
