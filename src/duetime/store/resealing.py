"""Re-sealing stored rows to a ring's first key, one batch at a time, for both backends.

A rotation walks timers by id: each row whose payload was sealed with another key (or not
sealed, in a namespace that now seals) is sealed with the first key, and so are its attempts'
errors and tracebacks and its last error. Each write names the value it replaces, so a row a
worker changed meanwhile is left as the worker wrote it (already sealed with the first key) and
nothing a worker writes is lost; a rotation stopped anywhere resumes from any earlier id, the
rows done already needing no change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from duetime.support.jsontext import load_json
from duetime.support.sealing import Sealing, sealed_token


@dataclass(frozen=True, slots=True)
class TimerReseal:
    id: int
    payload: str
    last_error: str | None
    old_payload: str
    old_last_error: str | None


@dataclass(frozen=True, slots=True)
class AttemptReseal:
    timer_id: int
    number: int
    error: str | None
    traceback: str | None
    old_error: str | None
    old_traceback: str | None


def reseal_timer(
    sealing: Sealing, id: int, namespace: str, payload: str, last_error: str | None
) -> TimerReseal | None:
    """What one stored timer row becomes (None: nothing to change)."""
    value = load_json(payload)
    new_payload = sealing.reseal_payload_text(value)
    if new_payload is None and sealed_token(value) is None and sealing.seals(namespace):
        new_payload = sealing.seal_payload(namespace, payload)
    new_error = _text(sealing, last_error)
    if new_payload is None and new_error == last_error:
        return None
    return TimerReseal(id, new_payload or payload, new_error, payload, last_error)


def reseal_attempt(
    sealing: Sealing, timer_id: int, number: int, error: str | None, traceback: str | None
) -> AttemptReseal | None:
    new_error, new_traceback = _text(sealing, error), _text(sealing, traceback)
    if new_error == error and new_traceback == traceback:
        return None
    return AttemptReseal(timer_id, number, new_error, new_traceback, error, traceback)


def _text(sealing: Sealing, text: str | None) -> str | None:
    """An error or traceback as the first key seals it: plain text sealed too."""
    resealed = sealing.reseal_text(text)
    if resealed is not None:
        return resealed
    if text is not None and sealing.open_text(text) == text:  # plain: seal it now
        return sealing.seal_error(text)
    return text


def params(item: TimerReseal | AttemptReseal) -> dict[str, Any]:
    return {name: getattr(item, name) for name in item.__slots__}
