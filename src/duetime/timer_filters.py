"""A caller's timer filter, read once for listings and bulk actions alike.

The dashboard's filter bar, ``GET …/timers`` and ``POST …/timers/bulk`` take the same fields;
each bad one is an InvalidInput naming it. ``type`` is an event type or a glob (``order.*``),
and the due range ``[due_from, due_until)`` takes instants, or durations meaning that long ago.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from duetime.errors import InvalidInput
from duetime.history import instant_or_ago
from duetime.model import BULK_ACTIONS, BulkAction, Status, TimerFilter
from duetime.routes import check_pattern
from duetime.validation import check_subject

Instant = str | datetime | timedelta | None


def timer_filter(
    *,
    subject: str | None = None,
    status: Status | str | None = None,
    type: str | None = None,
    due_from: Instant = None,
    due_until: Instant = None,
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
    return TimerFilter(subject, status, type, start, end)


def check_action(value: object, field: str = "action") -> BulkAction:
    """One of the bulk actions; InvalidInput naming ``field`` otherwise."""
    for action in BULK_ACTIONS:
        if value == action:
            return action
    raise InvalidInput(field, f"must be one of {', '.join(BULK_ACTIONS)}")
