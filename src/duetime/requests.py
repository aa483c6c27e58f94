"""A caller's request to schedule one timer, before validation: what every interface builds."""

from __future__ import annotations

import builtins
from dataclasses import dataclass, fields
from datetime import date as date_type
from datetime import datetime, timedelta
from itertools import combinations
from typing import Any

from duetime.bodies import PAYLOAD, SUBJECT, Body, BodyField, Schema, not_null
from duetime.errors import InvalidInput
from duetime.formats import (
    CORRELATION_PATTERN,
    DATE_PATTERN,
    DURATION_PATTERN,
    EXPIRES_PATTERN,
    INSTANT_PATTERN,
    LOCAL_PATTERN,
    MAX_SECONDS,
    TYPE_PATTERN,
    identifier_pattern,
    timezones,
)
from duetime.model import JSON, NewTimer
from duetime.model.fast_records import make_new_timer, shell_of, slot_setter
from duetime.timemath.durations import parse_span
from duetime.timemath.run_window import SPREADS, check_spread, check_window
from duetime.timemath.tzmath import DISAMBIGUATIONS
from duetime.timemath.when import parse_at, resolve_when
from duetime.validation import (
    MAX_ATTEMPTS_LIMIT,
    MAX_KEY_LENGTH,
    MAX_TYPE_LENGTH,
    PRIORITY_DEFAULT,
    PRIORITY_MAX,
    check_correlation_id,
    check_expires_after,
    check_key,
    check_max_attempts,
    check_priority,
    check_subject,
    check_type,
    encode_payload,
)

WHEN_FORMS = ("at", "delay", "local", "date")
"""A timer's due time: exactly one of these."""
IDENTIFIER = identifier_pattern()


def _when_rules() -> Schema:
    """Exactly one form of "when"; ``local`` with its zone (``resolve_when``'s rules); a
    ``spread`` only within a ``window``."""
    return {
        "oneOf": [not_null(form) for form in WHEN_FORMS],
        "dependentSchemas": {
            "local": {"anyOf": [{"properties": {"local": {"type": "null"}}}, not_null("timezone")]},
            "spread": {"anyOf": [{"properties": {"spread": {"type": "null"}}}, not_null("window")]},
        },
    }


def _string(pattern: str, **more: Any) -> Schema:
    return {"type": "string", "pattern": pattern, **more}


def _seconds(least: float) -> Schema:
    return {"type": "number", "minimum": least, "maximum": MAX_SECONDS}


TIMER_BODY = Body(
    "TimerBody",
    "Schedule one timer: exactly one of ``at``, ``delay``, ``local`` or ``date``.",
    (
        BodyField(
            "type",
            _string(TYPE_PATTERN, maxLength=MAX_TYPE_LENGTH),
            "The event type",
            ("followup.email",),
            required=True,
            missing="an event type is required",
        ),
        PAYLOAD,
        BodyField("at", _string(INSTANT_PATTERN), "ISO 8601", ("2025-03-15T13:00:00Z",)),
        BodyField(
            "delay",
            {"anyOf": [_string(DURATION_PATTERN), _seconds(0)]},
            "From now",
            ("P15D", 90),
        ),
        BodyField("local", _string(LOCAL_PATTERN), "Wall time", ("2025-03-15T09:00",)),
        BodyField("date", _string(DATE_PATTERN), "That day at 00:00", ("2025-03-15",)),
        BodyField(
            "timezone",
            lambda: {"type": "string", "enum": timezones()},
            examples=("America/New_York",),
        ),
        BodyField(
            "disambiguation",
            {"type": "string", "enum": list(DISAMBIGUATIONS)},
            default="compatible",
        ),
        BodyField(
            "key",
            _string(IDENTIFIER, maxLength=MAX_KEY_LENGTH),
            "Idempotency key (generated if absent)",
        ),
        SUBJECT,
        BodyField("correlation_id", _string(CORRELATION_PATTERN, maxLength=MAX_KEY_LENGTH)),
        BodyField(
            "max_attempts",
            {"type": "integer", "minimum": 1, "maximum": MAX_ATTEMPTS_LIMIT},
            whole=True,
        ),
        BodyField(
            "expires_after",
            {"anyOf": [_string(EXPIRES_PATTERN), _seconds(0.000001)]},
            examples=("PT1H",),
        ),
        BodyField(
            "priority",
            {"type": "integer", "minimum": PRIORITY_DEFAULT, "maximum": PRIORITY_MAX},
            "0 normal (the default) to 9 most urgent: due first",
            whole=True,
        ),
        BodyField(
            "window",
            {"anyOf": [_string(EXPIRES_PATTERN), _seconds(0.000001)]},
            "Run at a deterministic instant within [due, due + window]; the key and history"
            " keep the due instant",
            ("PT15M",),
        ),
        BodyField(
            "spread",
            {"type": "string", "enum": list(SPREADS)},
            "With a window: hash (the default: a stable hash of namespace, key and due"
            " instant) or even (every timer of the namespace and type due then, evenly)",
        ),
    ),
    _when_rules,
)
"""A timer request as JSON: :meth:`TimerRequest.from_dict` reads it, the API documents it."""

EDIT_FIELDS = ("at", "delay", "local", "date", "timezone", "disambiguation", "payload")
"""What an edit of a pending timer may change: its due time, its payload."""


def _edit_rules() -> Schema:
    """Something to change, at most one form of "when", ``local`` with its zone."""
    return {
        "minProperties": 1,
        "not": {"anyOf": [{"required": list(pair)} for pair in combinations(WHEN_FORMS, 2)]},
        "dependentRequired": {"local": ["timezone"]},
    }


EDIT_BODY = Body(
    "EditIn",
    "At most one of ``at``, ``delay``, ``local`` or ``date`` (with ``timezone``) and/or a new"
    " ``payload``; the timer's other fields stay.",
    tuple(f for f in TIMER_BODY.fields if f.name in EDIT_FIELDS),
    _edit_rules,
    unknown=f"is not a field one can edit ({', '.join(EDIT_FIELDS)})",
    nullable=False,
)
"""An edit of a pending timer (``AsyncApp.edit``, ``PATCH …/timers/{key}``): a timer body's
fields of its due time and payload, each given a value; the rest is carried over."""


@dataclass(frozen=True, slots=True, init=False)
class TimerRequest:
    """Everything ``schedule(...)`` accepts; exactly one of at / delay / local / date.

    Made once a request, by callers too: its ``__init__`` sets the slots as a mutable shell's,
    without the frozen dataclass's ``object.__setattr__`` a field (see
    :mod:`duetime.model.fast_records`)."""

    type: str
    payload: JSON = None
    at: str | datetime | None = None
    delay: str | int | float | timedelta | None = None
    local: str | datetime | None = None
    date: str | date_type | None = None
    timezone: str | None = None
    disambiguation: str = "compatible"
    key: str | None = None
    subject: str | None = None
    correlation_id: str | None = None
    max_attempts: int | None = None
    expires_after: str | float | timedelta | None = None
    priority: int | None = None
    """0 (None: the default) normal, up to 9 the most urgent: see ``Timer.priority``."""
    window: str | float | timedelta | None = None
    """Run within ``[due, due + window]``: see :mod:`duetime.timemath.run_window`."""
    spread: str | None = None
    """With a window: ``hash`` (the default) or ``even``."""

    def __init__(  # the dataclass's, set as a shell's slots (duetime.model.fast_records)
        self,
        type: str,
        payload: JSON = None,
        at: str | datetime | None = None,
        delay: str | int | float | timedelta | None = None,
        local: str | datetime | None = None,
        date: str | date_type | None = None,
        timezone: str | None = None,
        disambiguation: str = "compatible",
        key: str | None = None,
        subject: str | None = None,
        correlation_id: str | None = None,
        max_attempts: int | None = None,
        expires_after: str | float | timedelta | None = None,
        priority: int | None = None,
        window: str | float | timedelta | None = None,
        spread: str | None = None,
    ) -> None:
        if _type(self) is TimerRequest:  # filled in as its shell (see duetime.model.fast_records)
            shell: Any = self
            _set_class(self, "__class__", _Shell)
            shell.type = type
            shell.payload = payload
            shell.at = at
            shell.delay = delay
            shell.local = local
            shell.date = date
            shell.timezone = timezone
            shell.disambiguation = disambiguation
            shell.key = key
            shell.subject = subject
            shell.correlation_id = correlation_id
            shell.max_attempts = max_attempts
            shell.expires_after = expires_after
            shell.priority = priority
            shell.window = window
            shell.spread = spread
            shell.__class__ = TimerRequest
            return
        _set_type(self, type)
        _set_payload(self, payload)
        _set_at(self, at)
        _set_delay(self, delay)
        _set_local(self, local)
        _set_date(self, date)
        _set_timezone(self, timezone)
        _set_disambiguation(self, disambiguation)
        _set_key(self, key)
        _set_subject(self, subject)
        _set_correlation_id(self, correlation_id)
        _set_max_attempts(self, max_attempts)
        _set_expires_after(self, expires_after)
        _set_priority(self, priority)
        _set_window(self, window)
        _set_spread(self, spread)

    @classmethod
    def from_dict(cls, data: Any, field_prefix: str = "") -> TimerRequest:
        """Build from JSON (CLI files, REST bodies, broker messages) as :data:`TIMER_BODY`
        describes it; unknown fields are errors."""
        try:
            return cls(**TIMER_BODY.read(data, field_prefix))
        except TypeError as exc:  # pragma: no cover - guarded by the checks above
            raise InvalidInput(field_prefix.rstrip(".") or "body", str(exc)) from exc

    def resolve(
        self,
        namespace: str,
        now: datetime,
        default_max_attempts: int,
        max_payload_bytes: int,
        *,
        producer: str | None = None,
        straight_to_store: bool = False,
        trace_context: str | None = None,
    ) -> NewTimer:
        """Validate every field and turn the "when" into a UTC instant; ``producer`` is who
        stores it (set by the facade, not by the caller's request), ``trace_context`` the caller's
        span's (when tracing is on). ``straight_to_store`` is for
        a timer no caller holds before it is stored: it hands the store validation's JSON text
        of the payload (no one can change the payload under it) and leaves a key the caller
        did not give to the store. Otherwise such a key is generated here, so that the timer
        can be sent twice (``prepare``) and stay one timer."""
        at = self.at
        if (  # the common form, an aware datetime alone: what resolve_when does with it
            type(at) is datetime
            and self.delay is None
            and self.local is None
            and self.date is None
            and self.timezone is None
            and self.disambiguation == "compatible"
        ):
            due_at, local, timezone, disambiguation = parse_at(at), None, None, "compatible"
        else:
            when = resolve_when(
                now=now,
                at=at,
                delay=self.delay,
                local=self.local,
                date=self.date,
                timezone=self.timezone,
                disambiguation=self.disambiguation,
            )
            due_at, local, timezone = when.due_at, when.local, when.timezone
            disambiguation = when.disambiguation
        max_attempts = default_max_attempts if self.max_attempts is None else self.max_attempts
        window, spread = (None, None) if self.window is None else run_window_of(self)
        if window is None and self.spread is not None:
            raise InvalidInput("spread", "needs a window (e.g. window=PT15M)")
        # a window's instant is a hash of the key: one is drawn here when the caller gave none
        keyless = straight_to_store and self.key is None and window is None
        key = None if keyless else check_key(self.key)
        type_ = check_type(self.type)  # checked in field order
        payload, payload_json = encode_payload(self.payload, max_payload_bytes)
        return make_new_timer(  # NewTimer's fields in order, checked in that order
            namespace,
            key,
            type_,
            payload,
            due_at,
            check_max_attempts(max_attempts),
            None if (subject := self.subject) is None else check_subject(subject),
            None
            if (correlation := self.correlation_id) is None
            else check_correlation_id(correlation),
            None if (expires := self.expires_after) is None else check_expires_after(expires),
            local,
            timezone,
            disambiguation,
            producer,
            trace_context,
            PRIORITY_DEFAULT if (priority := self.priority) is None else check_priority(priority),
            payload_json if straight_to_store else None,
            window,
            spread,
        )


def run_window_of(request: TimerRequest) -> tuple[timedelta, str]:
    """A request's window (a positive duration) and how its instant is chosen."""
    window = check_window(parse_span(request.window or 0, "window"))
    spread = "hash" if request.spread is None else check_spread(request.spread)
    return window, spread


_type = builtins.type  # the name "type" is a field's within __init__
_set_class = object.__setattr__
_Shell = shell_of(TimerRequest)
_set_type = slot_setter(TimerRequest, "type")
_set_payload = slot_setter(TimerRequest, "payload")
_set_at = slot_setter(TimerRequest, "at")
_set_delay = slot_setter(TimerRequest, "delay")
_set_local = slot_setter(TimerRequest, "local")
_set_date = slot_setter(TimerRequest, "date")
_set_timezone = slot_setter(TimerRequest, "timezone")
_set_disambiguation = slot_setter(TimerRequest, "disambiguation")
_set_key = slot_setter(TimerRequest, "key")
_set_subject = slot_setter(TimerRequest, "subject")
_set_correlation_id = slot_setter(TimerRequest, "correlation_id")
_set_max_attempts = slot_setter(TimerRequest, "max_attempts")
_set_expires_after = slot_setter(TimerRequest, "expires_after")
_set_priority = slot_setter(TimerRequest, "priority")
_set_window = slot_setter(TimerRequest, "window")
_set_spread = slot_setter(TimerRequest, "spread")

if {f.name for f in fields(TimerRequest)} != TIMER_BODY.names:  # pragma: no cover
    raise TypeError("TIMER_BODY must describe exactly TimerRequest's fields")
