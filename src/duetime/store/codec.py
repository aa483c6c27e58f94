"""Conversions between stored column values and model values, shared by the backends."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta
from typing import Any

from duetime.errors import InvalidInput
from duetime.jsontext import json_text
from duetime.jsontext import load_json as load_json  # the stores' decoder, here with the rest
from duetime.model import NewTimer

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_micros(instant: datetime) -> int:
    """Aware datetime → integer microseconds since the epoch (exact, no float rounding)."""
    delta = instant - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(micros: int) -> datetime:
    return _EPOCH + timedelta(microseconds=micros)


def maybe_from_micros(micros: int | None) -> datetime | None:
    return None if micros is None else from_micros(micros)


def dump_json(value: Any) -> str:
    return json_text(value)


def payload_text(timer: NewTimer) -> str:
    """The JSON text to store for a timer's payload: validation's, when it kept it."""
    return json_text(timer.payload) if timer.payload_json is None else timer.payload_json


def encode_cursor(last_id: int) -> str:
    """An opaque page cursor: callers pass it back, they do not build it."""
    return base64.urlsafe_b64encode(f"id:{last_id}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> int | None:
    if cursor is None or cursor == "":
        return None
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        text = base64.urlsafe_b64decode(padded.encode()).decode()
        prefix, _, number = text.partition(":")
        if prefix != "id":
            raise ValueError(text)
        return int(number)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidInput("cursor", "not a cursor this server issued") from exc
