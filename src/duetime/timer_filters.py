"""A caller's timer filter, read once for listings and bulk actions alike.

The dashboard's filter bar, ``GET …/timers`` and ``POST …/timers/bulk`` take the same fields;
each bad one is an InvalidInput naming it. ``type`` is an event type or a glob (``order.*``),
and the due range ``[due_from, due_until)`` takes instants, or durations meaning that long ago.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from datetime import datetime, timedelta

from duetime.bus.routes import check_pattern
from duetime.errors import InvalidInput
from duetime.event_filters import instant_or_ago
from duetime.model import BULK_ACTIONS, BulkAction, Status, TimerFilter
from duetime.model.finding import MAX_SELECTED_KEYS, TIMER_SORTS, PayloadMatch, TimerSort
from duetime.schedules import check_schedule_name, occurrence_prefix
from duetime.validation import check_keys, check_subject

Instant = str | datetime | timedelta | None


def timer_filter(
    *,
    subject: str | None = None,
    status: Status | str | None = None,
    type: str | None = None,
    due_from: Instant = None,
    due_until: Instant = None,
    payload: str | PayloadMatch | None = None,
    keys: Sequence[str] | None = None,
    schedule: str | None = None,
    now: datetime,
) -> TimerFilter:
    """The :class:`TimerFilter` of these fields; InvalidInput names the first bad one.
    ``due_until`` at or before ``due_from`` is an empty range: it takes no timer."""
    if status is not None:
        try:
            status = Status(status)
        except ValueError:
            raise InvalidInput(
                "status", f"must be one of {', '.join(s.value for s in Status)}"
            ) from None
    if type is not None:
        check_pattern(type, "type")
    if subject is not None:
        subject = check_subject(subject)
    start = None if due_from is None else instant_or_ago(due_from, now, "due_from")
    end = None if due_until is None else instant_or_ago(due_until, now, "due_until")
    match = payload_match(payload) if isinstance(payload, str) else payload
    selected = None if keys is None else selected_keys(keys)
    prefix = (
        None if schedule is None else occurrence_prefix(check_schedule_name(schedule, "schedule"))
    )
    return TimerFilter(subject, status, type, start, end, match, selected, prefix)


PAYLOAD_KEY = re.compile(r"[A-Za-z0-9_-]{1,64}")
MAX_PAYLOAD_DEPTH = 8
PAYLOAD_FORM = 'PATH=VALUE, e.g. customer.id=42 or status="paid"'


def payload_match(text: str, field: str = "payload") -> PayloadMatch:
    """``customer.id=42`` as a :class:`PayloadMatch`; InvalidInput naming ``field`` if bad.

    The path is dotted keys from the payload's top (a leading ``payload.`` is allowed, as in
    a limit's ``partition_by``); the value is JSON when it parses as a JSON scalar (``42``,
    ``true``, ``null``, ``"42"``), else the text as typed (``paid``)."""
    path_text, sep, value_text = text.partition("=")
    if not sep:
        raise InvalidInput(field, f"must be {PAYLOAD_FORM}")
    path = path_text.strip().removeprefix("payload.").split(".")
    if len(path) > MAX_PAYLOAD_DEPTH:
        raise InvalidInput(field, f"the path is deeper than {MAX_PAYLOAD_DEPTH} keys")
    for key in path:
        if not PAYLOAD_KEY.fullmatch(key):
            raise InvalidInput(
                field,
                f"the path {path_text.strip()!r} must be keys of letters, digits, _ or -, "
                f"joined by dots ({PAYLOAD_FORM})",
            )
    value_text = value_text.strip()
    try:
        value = json.loads(value_text, parse_constant=_no_constant)
    except ValueError:
        value = value_text
    if isinstance(value, dict | list):
        raise InvalidInput(field, "the value must be a string, number, true, false or null")
    check_payload_value(value, field)
    return PayloadMatch(tuple(path), value)


INT_RANGE = (-(2**63), 2**63 - 1)
"""The integers both databases compare exactly: SQLite's INTEGER, PostgreSQL's bigint."""


def check_payload_value(value: object, field: str) -> None:
    """A value both stores can compare, else InvalidInput naming ``field``: a whole number
    beyond 64 bits has no SQLite integer, an infinite or NaN float no JSON number, and a NUL
    no PostgreSQL text, so each would fail inside the database rather than match nothing."""
    if isinstance(value, bool):
        return
    if isinstance(value, int) and not INT_RANGE[0] <= value <= INT_RANGE[1]:
        raise InvalidInput(field, "the number is out of range: whole numbers fit in 64 bits")
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidInput(field, "the number is out of range: it must be finite")
    if isinstance(value, str) and "\x00" in value:
        raise InvalidInput(field, "the value must not contain NUL (\\x00)")


def _no_constant(name: str) -> object:
    raise ValueError(name)


def selected_keys(keys: Sequence[str], field: str = "keys") -> tuple[str, ...]:
    """A selection of timer keys: :func:`~duetime.validation.check_keys`, at most
    :data:`MAX_SELECTED_KEYS` of them."""
    return tuple(check_keys(keys, field, MAX_SELECTED_KEYS))


def check_sort(value: object, field: str = "sort") -> TimerSort:
    """One of the listing orders; InvalidInput naming ``field`` otherwise."""
    for sort in TIMER_SORTS:
        if value == sort:
            return sort
    raise InvalidInput(field, f"must be one of {', '.join(TIMER_SORTS)}")


def check_action(value: object, field: str = "action") -> BulkAction:
    """One of the bulk actions; InvalidInput naming ``field`` otherwise."""
    for action in BULK_ACTIONS:
        if value == action:
            return action
    raise InvalidInput(field, f"must be one of {', '.join(BULK_ACTIONS)}")
