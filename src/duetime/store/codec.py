"""Conversions between stored column values and model values, shared by the backends."""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from duetime.model import NewTimer, PutResult
from duetime.model.fast_records import make_new_timer, make_put_result
from duetime.support.jsontext import json_text
from duetime.support.jsontext import (
    load_json as load_json,
)  # the stores' decoder, here with the rest
from duetime.support.sealing import TEXT_MARK, Sealing, sealed_token

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


def sealed_timers(timers: Iterable[NewTimer], sealing: Sealing) -> Iterable[NewTimer]:
    """``timers`` as a store writes them: each of a sealed namespace with its payload's stored
    text sealed (``payload_json``), its ``payload`` as given, so what the write answers shows
    the caller's own value. Lazy, as the timers come."""
    if not sealing.enabled:
        return timers
    return (sealed_timer(timer, sealing) for timer in timers)


def sealed_timer(timer: NewTimer, sealing: Sealing) -> NewTimer:
    if not sealing.seals(timer.namespace):
        return timer
    return make_new_timer(
        timer.namespace,
        timer.key,
        timer.type,
        timer.payload,
        timer.due_at,
        timer.max_attempts,
        timer.subject,
        timer.correlation_id,
        timer.expires_after,
        timer.local,
        timer.timezone,
        timer.disambiguation,
        timer.producer,
        timer.trace_context,
        timer.priority,
        sealing.seal_payload(timer.namespace, payload_text(timer)),
        timer.window,
        timer.spread,
        timer.run_at,
    )


def opened_results(results: list[PutResult], sealing: Sealing) -> list[PutResult]:
    """A write's results, the stored timers it kept read as stored, with their sealed values
    opened as any read opens them."""
    for at, result in enumerate(results):
        timer = result.timer
        if sealed_token(timer.payload) is not None or (
            timer.last_error is not None and timer.last_error.startswith(TEXT_MARK)
        ):
            opened = replace(
                timer,
                payload=sealing.open_payload(timer.payload),
                last_error=sealing.open_text(timer.last_error),
            )
            results[at] = make_put_result(result.action, opened)
    return results


def like_pattern(pattern: str) -> str:
    """A route's glob ``pattern`` as an SQL ``LIKE`` pattern (backslash escapes): ``*`` → ``%``,
    the rest literal — ``_``, which event types may contain, is a ``LIKE`` wildcard, so it is
    escaped."""
    escaped = pattern.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped.replace("*", "%")


def new_claim_token() -> int:
    """A fresh claim's token (63 random bits, a PostgreSQL bigint): written on the rows the claim
    takes and required by every later write about their attempts. The attempt number and owner
    alone do not tell two claims apart when a database crash forgot the first (the claim
    commits without waiting for its flush) and the same node claims the row again."""
    return secrets.randbits(63)
