"""Fast constructors for the records made once a row or a request on the busy paths.

A frozen dataclass's ``__init__`` sets each field with ``object.__setattr__`` by name, a call
and a lookup a field; setting each slot through its descriptor's ``__set__`` skips the lookup,
and a plain attribute store on a mutable object with the same slots — one bytecode the
interpreter specialises for slots — skips the call too. So ``Timer`` (a claimed or written row:
28 fields, made once a job by the worker and once a timer scheduled), ``NewTimer`` (a validated
request) and ``TimerRequest`` are filled in as a :func:`shell_of` their class, a mutable class
with the same slots, and then made what they are by ``__class__`` assignment, which Python
allows between classes of the same layout; so is the done ``Finish`` a worker makes a job
(:func:`make_done`). The functions are typed with the record's own fields, so every call is
checked.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from datetime import datetime, timedelta
from typing import Any, TypeVar

from duetime.model import JSON, Finish, NewTimer, Outcome, PutAction, PutResult, Status, Timer

R = TypeVar("R")


def slot_setter(cls: type[R], name: str) -> Callable[[R, Any], None]:
    """The descriptor's ``__set__`` of one slot of ``cls`` (bypasses ``frozen``: only for an
    object being made)."""
    if name not in {f.name for f in fields(cls)}:  # type: ignore[arg-type]
        raise AttributeError(f"{cls.__name__} has no field {name!r}")
    setter: Callable[[R, Any], None] = getattr(cls, name).__set__
    return setter


def shell_of(cls: type[Any]) -> type[Any]:
    """A mutable class with the slots of the slotted ``cls``: an instance of it, every slot
    set, becomes a ``cls`` by ``obj.__class__ = cls``. Checked here, once: a Python that
    refused the assignment would fail at import, not on a busy path."""
    shell = type(f"{cls.__name__}Shell", (), {"__slots__": cls.__slots__})
    probe: Any = object.__new__(shell)
    probe.__class__ = cls
    return shell


_new = object.__new__
_TimerShell = shell_of(Timer)
_NewTimerShell = shell_of(NewTimer)
_PutResultShell = shell_of(PutResult)
_FinishShell = shell_of(Finish)
_DONE = Outcome.DONE

set_claim_token = slot_setter(Timer, "claim_token")
"""Stamp a just-claimed Timer with its claim's token (the object is still being made)."""
set_fired_at = slot_setter(Timer, "fired_at")
"""Give a just-claimed Timer that has not fired yet the start of its attempt as ``fired_at``,
the instant its outcome records (the object is the worker's own until its outcome)."""


def make_timer(
    id: int,
    namespace: str,
    key: str,
    type: str,
    payload: JSON,
    subject: str | None,
    due_at: datetime,
    status: Status,
    attempts: int,
    max_attempts: int,
    registered_at: datetime,
    updated_at: datetime,
    run_at: datetime,
    correlation_id: str | None,
    expires_after: timedelta | None,
    local: datetime | None,
    timezone: str | None,
    disambiguation: str,
    fired_at: datetime | None,
    completed_at: datetime | None,
    last_error: str | None,
    lease_owner: str | None,
    lease_expires_at: datetime | None,
    destination: str | None,
    producer: str | None,
    trace_context: str | None,
    priority: int,
    claim_token: int | None = None,
    window: timedelta | None = None,
    spread: str | None = None,
) -> Timer:
    """``Timer(...)`` with every field given, in a fifth of its time."""
    timer: Any = _new(_TimerShell)
    timer.id = id
    timer.namespace = namespace
    timer.key = key
    timer.type = type
    timer.payload = payload
    timer.subject = subject
    timer.due_at = due_at
    timer.status = status
    timer.attempts = attempts
    timer.max_attempts = max_attempts
    timer.registered_at = registered_at
    timer.updated_at = updated_at
    timer.run_at = run_at
    timer.correlation_id = correlation_id
    timer.expires_after = expires_after
    timer.local = local
    timer.timezone = timezone
    timer.disambiguation = disambiguation
    timer.fired_at = fired_at
    timer.completed_at = completed_at
    timer.last_error = last_error
    timer.lease_owner = lease_owner
    timer.lease_expires_at = lease_expires_at
    timer.destination = destination
    timer.producer = producer
    timer.trace_context = trace_context
    timer.priority = priority
    timer.claim_token = claim_token
    timer.window = window
    timer.spread = spread
    timer.__class__ = Timer
    made: Timer = timer
    return made


def make_done(
    timer_id: int, attempt: int, claim_token: int | None, started_at: datetime | None
) -> Finish:
    """``Finish(timer_id, attempt, Outcome.DONE, claim_token=..., started_at=...)``, the outcome
    of nearly every job, made as a shell's slots are set (one a job)."""
    finish: Any = _new(_FinishShell)
    finish.timer_id = timer_id
    finish.attempt = attempt
    finish.outcome = _DONE
    finish.error = None
    finish.run_at = None
    finish.traceback = None
    finish.claim_token = claim_token
    finish.started_at = started_at
    finish.__class__ = Finish
    made: Finish = finish
    return made


def make_new_timer(
    namespace: str,
    key: str | None,
    type: str,
    payload: JSON,
    due_at: datetime,
    max_attempts: int,
    subject: str | None,
    correlation_id: str | None,
    expires_after: timedelta | None,
    local: datetime | None,
    timezone: str | None,
    disambiguation: str,
    producer: str | None,
    trace_context: str | None,
    priority: int,
    payload_json: str | None,
    window: timedelta | None = None,
    spread: str | None = None,
    run_at: datetime | None = None,
) -> NewTimer:
    """``NewTimer(...)`` with every field given, ``payload_json`` too, in a fifth of its time."""
    timer: Any = _new(_NewTimerShell)
    timer.namespace = namespace
    timer.key = key
    timer.type = type
    timer.payload = payload
    timer.due_at = due_at
    timer.max_attempts = max_attempts
    timer.subject = subject
    timer.correlation_id = correlation_id
    timer.expires_after = expires_after
    timer.local = local
    timer.timezone = timezone
    timer.disambiguation = disambiguation
    timer.producer = producer
    timer.trace_context = trace_context
    timer.priority = priority
    timer.payload_json = payload_json
    timer.window = window
    timer.spread = spread
    timer.run_at = run_at
    timer.__class__ = NewTimer
    made: NewTimer = timer
    return made


def make_put_result(action: PutAction, timer: Timer) -> PutResult:
    """``PutResult(action, timer)``, in a third of its time (one a timer scheduled)."""
    result: Any = _new(_PutResultShell)
    result.action = action
    result.timer = timer
    result.__class__ = PutResult
    made: PutResult = result
    return made
