"""A caller's request to schedule one timer, before validation: what every interface builds."""

from __future__ import annotations

import builtins
from dataclasses import dataclass, fields
from datetime import date as date_type
from datetime import datetime, timedelta
from typing import Any

from duetime.errors import InvalidInput
from duetime.model import JSON, NewTimer
from duetime.model.fast_records import make_new_timer, shell_of, slot_setter
from duetime.timemath.when import parse_at, resolve_when
from duetime.validation import (
    PRIORITY_DEFAULT,
    check_correlation_id,
    check_expires_after,
    check_key,
    check_max_attempts,
    check_priority,
    check_subject,
    check_type,
    encode_payload,
    whole_number,
)

JSON_COUNTS = ("max_attempts", "priority")
"""Fields read as whole numbers from JSON, where 3.0 is 3."""


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

    @classmethod
    def from_dict(cls, data: Any, field_prefix: str = "") -> TimerRequest:
        """Build from JSON (CLI files, REST bodies, broker messages); unknown fields are errors."""
        if not isinstance(data, dict):
            raise InvalidInput(field_prefix.rstrip(".") or "body", "must be a JSON object")
        known = {f.name for f in fields(cls)}
        for name in data:
            if name not in known:
                raise InvalidInput(f"{field_prefix}{name}", "is not a known field")
        if "type" not in data:
            raise InvalidInput(f"{field_prefix}type", "an event type is required")
        # JSON has one number type: 3.0 is the whole number 3 there (and in JSON Schema).
        counts = {name: whole_number(data[name]) for name in JSON_COUNTS if name in data}
        try:
            return cls(**{**data, **counts})
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
        key = None if straight_to_store and self.key is None else check_key(self.key)
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
        )


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
