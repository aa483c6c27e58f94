"""Opaque page cursors: what a listing hands back so the next page starts after its last row.

Callers pass them back and never build them; each says which listing it belongs to (``id:``,
``event:``, ``name:``), so one listing's cursor given to another is refused as not issued here.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta

from duetime.errors import InvalidInput

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def _encode(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _decode(cursor: str, prefix: str) -> str:
    """The text after ``prefix:``; InvalidInput naming ``cursor`` for anything else."""
    try:
        text = base64.urlsafe_b64decode((cursor + "=" * (-len(cursor) % 4)).encode()).decode()
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidInput("cursor", "not a cursor this server issued") from exc
    found, _, rest = text.partition(":")
    if found != prefix:
        raise InvalidInput("cursor", "not a cursor this server issued")
    return rest


def encode_cursor(last_id: int) -> str:
    """After the row ``last_id`` of a listing by id."""
    return _encode(f"id:{last_id}")


def decode_cursor(cursor: str | None) -> int | None:
    """The id to list before (None: from the newest)."""
    if cursor is None or cursor == "":
        return None
    try:
        return int(_decode(cursor, "id"))
    except ValueError as exc:
        raise InvalidInput("cursor", "not a cursor this server issued") from exc


def encode_event_cursor(fired_at: datetime, timer_id: int) -> str:
    """After the event ``(fired_at, id)``: the event log is ordered by both."""
    return _encode(f"event:{(fired_at - _EPOCH) // _MICROSECOND}:{timer_id}")


def decode_event_cursor(cursor: str | None) -> tuple[datetime, int] | None:
    """``(fired_at, id)`` to list before (None: from the newest)."""
    if cursor is None or cursor == "":
        return None
    try:
        micros, timer_id = _decode(cursor, "event").split(":")
        return _EPOCH + int(micros) * _MICROSECOND, int(timer_id)
    except (ValueError, OverflowError) as exc:
        raise InvalidInput("cursor", "not a cursor this server issued") from exc


def encode_name_cursor(name: str) -> str:
    """After ``name`` in a listing by name."""
    return _encode(f"name:{name}")


def decode_name_cursor(cursor: str | None) -> str:
    """The name to list after ('' from the start)."""
    if cursor is None or cursor == "":
        return ""
    return _decode(cursor, "name")
