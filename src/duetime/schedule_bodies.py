"""A schedule's bodies, described once: what a definition and a change may hold.

:data:`SCHEDULE_REQUEST_BODY` is how :meth:`duetime.ScheduleRequest.from_dict` reads a
definition (files, the REST API); :data:`SCHEDULE_PUT_BODY` is the REST API's definition (an
``active`` that may be left out, and ``on_conflict``) and :data:`SCHEDULE_PATCH_BODY` its change
of some fields. Each reads a body and is what ``/openapi.json`` shows of it (see
:mod:`duetime.bodies`); the values are checked by :class:`~duetime.ScheduleRequest` and the
time math, whose errors name the field.
"""

from __future__ import annotations

from dataclasses import replace
from itertools import combinations
from typing import Any, get_args

from duetime.bodies import PAYLOAD, SUBJECT, Body, BodyField, Schema, not_null
from duetime.formats import (
    CRON_PATTERN,
    EVERY_PATTERN,
    EXPIRES_PATTERN,
    GRACE_PATTERN,
    INSTANT_PATTERN,
    MAX_SECONDS,
    TYPE_PATTERN,
    timezones,
)
from duetime.model import CatchUp
from duetime.timemath.recurrence.business import Roll
from duetime.timemath.recurrence.calendar import Feb29
from duetime.timemath.recurrence.cron import OnGap, OnOverlap
from duetime.timemath.recurrence.deadline import MAX_DEADLINE, MAX_PAUSE_AFTER
from duetime.timemath.recurrence.overlap import MAX_CATCH_UP_GRACE, OverlapPolicy
from duetime.validation import MAX_ATTEMPTS_LIMIT, MAX_TYPE_LENGTH

SCHEDULE_NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.:@+=-]*$"
RULE_KINDS = ("cron", "every", "rrule")
"""The ways to say when a schedule recurs: a definition gives exactly one."""
CALENDAR_OPTIONS = ("dtstart", "exdates", "rdates", "holidays", "holiday_dates", "weekend", "roll")
"""What only a recurrence rule takes (and ``feb29`` other than its default)."""
ON_CONFLICT = ("update", "keep", "error")
"""What defining a name that exists does: bring it to the definition, keep it, or refuse."""
GRACE_SECONDS = int(MAX_CATCH_UP_GRACE.total_seconds())
DEADLINE_SECONDS = int(MAX_DEADLINE.total_seconds())
OVERLAP_HELP = (
    "An occurrence due while an earlier one is unfinished (not started, running or waiting "
    "for a retry): allow fires it, skip records it skipped, buffer_one fires it when the "
    "earlier one ends (one at most; more are skipped)"
)
GRACE_HELP = (
    "How late an occurrence may be and still fire (ISO 8601 duration or seconds, 0 to 31 "
    "days); past it, catch_up decides"
)


def _text(pattern: str | None = None, **more: Any) -> Schema:
    return {"type": "string", **({"pattern": pattern} if pattern else {}), **more}


def _one_of(names: Any) -> Schema:
    return {"type": "string", "enum": list(get_args(names))}


_TEXTS: Schema = {"type": "array", "items": {"type": "string"}}

NAME = BodyField(
    "name",
    _text(SCHEDULE_NAME_PATTERN, minLength=1, maxLength=200),
    "Unique in the namespace; part of every occurrence's timer key",
    ("birthday:user-42",),
    required=True,
)
TYPE = BodyField(
    "type",
    _text(TYPE_PATTERN, maxLength=MAX_TYPE_LENGTH),
    examples=("birthday.greeting",),
    required=True,
)
RULE_FIELDS = (
    PAYLOAD,
    BodyField("cron", _text(CRON_PATTERN), "5-field cron, or an alias", ("0 9 * * *", "@daily")),
    BodyField(
        "every",
        {
            "anyOf": [
                _text(EVERY_PATTERN),
                {"type": "number", "minimum": 1, "maximum": MAX_SECONDS},
            ]
        },
        "Fixed interval: ISO 8601 duration or seconds",
        ("PT5M", 300),
    ),
    BodyField(
        "timezone",
        lambda: {"type": "string", "enum": timezones()},
        "IANA zone of the cron",
        ("Asia/Tokyo",),
    ),
    SUBJECT,
    BodyField("start_at", _text(INSTANT_PATTERN), examples=("2025-03-15T00:00:00Z",)),
    BodyField(
        "end_at",
        _text(INSTANT_PATTERN),
        "No occurrence after it; a new schedule's must leave one after now (422)",
        ("2026-03-15T00:00:00Z",),
    ),
    BodyField(
        "catch_up",
        _one_of(CatchUp),
        "After an outage: latest, all or none",
        default="latest",
    ),
    BodyField("on_gap", _one_of(OnGap), "Fixed-time cron in a DST gap", default="run_after"),
    BodyField(
        "on_overlap", _one_of(OnOverlap), "Fixed-time cron in a repeated hour", default="once"
    ),
    BodyField(
        "max_attempts",
        {"type": "integer", "minimum": 1, "maximum": MAX_ATTEMPTS_LIMIT},
        whole=True,
    ),
    BodyField("overlap", _one_of(OverlapPolicy), OVERLAP_HELP, default="allow"),
    BodyField(
        "catch_up_grace",
        {
            "anyOf": [
                _text(GRACE_PATTERN),
                {"type": "number", "minimum": 0, "maximum": GRACE_SECONDS},
            ]
        },
        GRACE_HELP,
        ("PT5M", 300),
        default=60,
    ),
    BodyField(
        "must_succeed_within",
        {
            "anyOf": [
                _text(EXPIRES_PATTERN),
                {"type": "number", "minimum": 1, "maximum": DEADLINE_SECONDS},
            ]
        },
        "Each occurrence's deadline after its instant (ISO 8601 duration or seconds, 1 second "
        "to 366 days): one not done by then is missed (a schedule.missed event)",
        ("PT30M", 1800),
    ),
    BodyField(
        "pause_after_failures",
        {"type": "integer", "minimum": 1, "maximum": MAX_PAUSE_AFTER},
        "Pause after this many missed or dead occurrences in a row (a schedule.paused event)",
        (3,),
        whole=True,
    ),
    BodyField(
        "rrule",
        _text(),
        "Instead of cron/every: an RFC 5545 recurrence rule from dtstart",
        ("FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1",),
    ),
    BodyField("dtstart", _text(), "With rrule: local time in timezone", ("2027-01-29T17:00",)),
    BodyField("exdates", _TEXTS, "Local times the rrule skips"),
    BodyField("rdates", _TEXTS, "Local times added to the rrule"),
    BodyField(
        "holidays",
        _text(),
        "Public holidays: country or country-subdivision",
        ("DE-BE",),
    ),
    BodyField("holiday_dates", _TEXTS, "Your own non-business dates"),
    BodyField(
        "weekend",
        {"anyOf": [_TEXTS, _text()]},
        "The days that are not business days; null: the default, Saturday and Sunday",
        (["sat", "sun"],),
    ),
    BodyField(
        "roll",
        _one_of(Roll),
        "An occurrence on a non-business day: skip, forward, backward, or "
        "modified_forward / modified_backward (that way unless it leaves the month, then the "
        "other way)",
    ),
    BodyField(
        "feb29",
        _one_of(Feb29),
        "A yearly rule on 29 February in common years: feb28, mar1, skip",
        default="feb28",
    ),
    BodyField(
        "window",
        {"anyOf": [_text(EXPIRES_PATTERN), {"type": "number", "exclusiveMinimum": 0}]},
        "Each occurrence runs at a deterministic instant within [due, due + window] (ISO 8601"
        " duration or seconds), at most the rule's shortest gap between occurrences",
        ("PT15M",),
    ),
)
"""What a schedule's definition may say besides its name, type and whether it runs."""


def _null_or_with(needed: str, name: str, unless: Schema) -> Schema:
    """``name`` is ``unless`` (null, its default) or ``needed`` is given (not null)."""
    return {"anyOf": [{"properties": {name: unless}}, not_null(needed)]}


def _rule_rules() -> Schema:
    """A definition has one rule: a cron expression, an interval or a recurrence rule; the
    calendar's options come with a recurrence rule only, and it with its ``dtstart``."""
    return {
        "oneOf": [not_null(kind) for kind in RULE_KINDS],
        "dependentSchemas": {
            **{name: _null_or_with("rrule", name, {"type": "null"}) for name in CALENDAR_OPTIONS},
            "feb29": _null_or_with("rrule", "feb29", {"const": "feb28"}),
            "rrule": _null_or_with("dtstart", "rrule", {"type": "null"}),
        },
    }


_DEFINE = (
    "Create a schedule, or bring an existing one to this definition: ``cron``, ``every`` or "
    "``rrule``."
)

SCHEDULE_REQUEST_BODY = Body(
    "ScheduleRequest",
    _DEFINE,
    (
        NAME,
        TYPE,
        *RULE_FIELDS,
        BodyField("active", {"type": "boolean"}, "Create paused with false", default=True),
    ),
    _rule_rules,
)
"""A definition as :meth:`duetime.ScheduleRequest.from_dict` reads it (``active``: true unless
given)."""

SCHEDULE_PUT_BODY = Body(
    "ScheduleBody",
    _DEFINE,
    (
        *RULE_FIELDS,
        NAME,
        TYPE,
        BodyField(
            "active",
            {"type": "boolean"},
            "Create paused with false; absent leaves an existing one as it is",
        ),
        BodyField("on_conflict", {"type": "string", "enum": list(ON_CONFLICT)}, default="update"),
    ),
    _rule_rules,
)
"""``POST …/schedules``: a definition, with what to do when the name exists."""

NOT_CLEARABLE = (
    "type",
    "catch_up",
    "on_gap",
    "on_overlap",
    "active",
    "overlap",
    "catch_up_grace",
    "feb29",
)
"""Fields of a patch that cannot be cleared: null is refused, not read as "unchanged"."""


def _patch_rules() -> Schema:
    """At least one field, and at most one rule kind (one replaces the others)."""
    return {
        "minProperties": 1,
        "not": {"anyOf": [not_null(*pair) for pair in combinations(RULE_KINDS, 2)]},
    }


SCHEDULE_PATCH_BODY = Body(
    "SchedulePatch",
    "Change some fields (absent ones stay); null clears an optional one (``timezone`` → UTC, "
    "``max_attempts`` → the server's default). ``cron`` replaces ``every`` and back.",
    tuple(
        replace(field, required=False, default=None, null=field.name not in NOT_CLEARABLE)
        for field in (
            TYPE,
            *RULE_FIELDS,
            BodyField("active", {"type": "boolean"}, "false pauses, true resumes"),
        )
    ),
    _patch_rules,
)
"""``PATCH …/schedules/{name}``: the fields of a definition, each optional, none defaulted."""
