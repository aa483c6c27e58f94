"""Frozen records shared by every layer: what a timer, an attempt and a node look like.

Instants are aware UTC datetimes and end in ``_at``; durations end in ``_after``.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from duetime.model.finding import PayloadMatch
from duetime.model.pages import Page as Page
from duetime.support.tracebacks import trimmed
from duetime.timemath.recurrence.calendar import Calendar, calendar_fields

JSON = Any
"""A JSON-compatible value (dict, list, str, int, float, bool, None)."""


class Status(enum.StrEnum):
    """Lifecycle of a timer: scheduled → running → done, with the side exits."""

    SCHEDULED = "scheduled"
    RUNNING = "running"
    RETRYING = "retrying"
    DONE = "done"
    DEAD = "dead"
    CANCELLED = "cancelled"
    EXPIRED = "expired"

    @property
    def is_pending(self) -> bool:
        return self in (Status.SCHEDULED, Status.RETRYING)

    @property
    def is_final(self) -> bool:
        return self in (Status.DONE, Status.DEAD, Status.CANCELLED, Status.EXPIRED)


class Outcome(enum.StrEnum):
    """How one attempt ended, as recorded in the attempts history."""

    DONE = "done"
    RETRY = "retry"
    SNOOZED = "snoozed"
    CANCELLED = "cancelled"
    DEAD = "dead"
    EXPIRED = "expired"
    LOST = "lost"
    """The lease ran out before the owner finished (crash, pause, partition)."""
    RELEASED = "released"
    """The owner gave the work back unstarted while shutting down."""
    FANNED_OUT = "fanned_out"
    """An event handed on as one delivery per destination (the event itself is then done)."""


OnConflict = Literal["update", "keep", "error"]
PutAction = Literal["created", "updated", "kept"]


@dataclass(frozen=True, slots=True)
class Timer:
    """One event due at one instant, identified by ``(namespace, key)``."""

    id: int
    namespace: str
    key: str
    type: str
    payload: JSON
    subject: str | None
    due_at: datetime
    status: Status
    attempts: int
    max_attempts: int
    registered_at: datetime
    updated_at: datetime
    run_at: datetime
    """When the next attempt may start: ``due_at``, or later after a retry or snooze."""
    correlation_id: str | None = None
    expires_after: timedelta | None = None
    local: datetime | None = None
    """The wall-clock time the caller asked for (local/date forms), re-resolved on tz changes."""
    timezone: str | None = None
    disambiguation: str = "compatible"
    fired_at: datetime | None = None
    completed_at: datetime | None = None
    last_error: str | None = None
    lease_owner: str | None = None
    lease_expires_at: datetime | None = None
    destination: str | None = None
    """None for an event; for one delivery of a fanned-out event, the destination it goes to."""
    producer: str | None = None
    """Who stored it: the emitting node's id, ``api``, ``cli`` (None when unknown)."""
    trace_context: str | None = None
    """The W3C trace context of the code that stored it: its ``traceparent``, then after a
    space its ``tracestate`` if any (None: stored with no span active, or tracing off)."""
    priority: int = 0
    """Priority within the due timers: 0 normal (the default), up to 9 the most urgent. A claim
    takes the due timers of higher priority first, then the earlier due."""
    claim_token: int | None = field(default=None, compare=False, repr=False)
    """On a row a claim just took: that claim's token, which every write about its attempt
    carries (see :attr:`Finish.claim_token`); None on a timer read any other way."""

    def to_dict(self) -> dict[str, JSON]:
        """A JSON-ready view (ISO 8601 instants with 'Z')."""
        return {
            "id": self.id,
            "namespace": self.namespace,
            "key": self.key,
            "type": self.type,
            "payload": self.payload,
            "subject": self.subject,
            "status": self.status.value,
            "due_at": iso(self.due_at),
            "run_at": iso(self.run_at),
            "local": self.local.isoformat() if self.local else None,
            "timezone": self.timezone,
            "disambiguation": self.disambiguation,
            "correlation_id": self.correlation_id,
            "attempts": self.attempts,
            "max_attempts": self.max_attempts,
            "expires_after": self.expires_after.total_seconds() if self.expires_after else None,
            "registered_at": iso(self.registered_at),
            "updated_at": iso(self.updated_at),
            "fired_at": iso(self.fired_at),
            "completed_at": iso(self.completed_at),
            "last_error": self.last_error,
            "lease_owner": self.lease_owner,
            "lease_expires_at": iso(self.lease_expires_at),
            "destination": self.destination,
            "producer": self.producer,
            "priority": self.priority,
        }


@dataclass(frozen=True, slots=True)
class NewTimer:
    """A validated request to store a timer; the store fills in id, status and bookkeeping."""

    namespace: str
    key: str | None
    """None: the store generates one (:func:`~duetime.validation.generate_key`), which no
    stored timer holds, so the timer is never merged with another."""
    type: str
    payload: JSON
    due_at: datetime
    max_attempts: int
    subject: str | None = None
    correlation_id: str | None = None
    expires_after: timedelta | None = None
    local: datetime | None = None
    timezone: str | None = None
    disambiguation: str = "compatible"
    producer: str | None = None
    trace_context: str | None = None
    """The caller's W3C trace context (see :attr:`Timer.trace_context`), when tracing is on."""
    priority: int = 0
    """See :attr:`Timer.priority`."""
    payload_json: str | None = field(default=None, init=False, compare=False, repr=False)
    """``payload`` as the JSON text validation made of it (``straight_to_store``), so the
    store need not encode it again. Not an argument: a copy (``dataclasses.replace``) starts
    without it, so it never describes a payload it was not made from."""


@dataclass(frozen=True, slots=True)
class PutResult:
    """What scheduling did with a key: created it, updated it, or kept the stored one."""

    action: PutAction
    timer: Timer


@dataclass(frozen=True, slots=True)
class Attempt:
    """One try at delivering a timer: who, when, and how it ended."""

    timer_id: int
    number: int
    node_id: str
    started_at: datetime | None
    """When its handler (or delivery) truly began, as its worker reported with the outcome;
    None while that is not known: the attempt is running, or was lost with its node."""
    finished_at: datetime | None = None
    outcome: Outcome | None = None
    error: str | None = None
    traceback: str | None = None
    """Where a failed attempt's exception was raised (innermost frames, bounded)."""
    claimed_at: datetime | None = None
    """When the claim that took the row for it was made (up to the claim's look-ahead before
    the due instant, never the horizon it claimed up to), on the clock of the other instants:
    ``claimed_at <= started_at <= finished_at``. None only on rows written before it was
    kept."""

    def to_dict(self) -> dict[str, JSON]:
        return {
            "number": self.number,
            "node_id": self.node_id,
            "claimed_at": iso(self.claimed_at),
            "started_at": iso(self.started_at),
            "finished_at": iso(self.finished_at),
            "outcome": self.outcome.value if self.outcome else None,
            "error": self.error,
            "traceback": self.traceback,
            "traceback_trimmed": trimmed(self.traceback),
        }


@dataclass(frozen=True, slots=True)
class Claimed:
    """A timer a node has just claimed: the attempt number fences every later write.

    ``problem`` says why its stored row could not be read (``timer`` then holds only what
    could: see :func:`unreadable_timer`); the worker ends that timer alone, dead with the
    reason, and the rest of its claim runs as usual."""

    timer: Timer
    attempt: int
    problem: str | None = None


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def unreadable_timer(id: int, namespace: str, key: object, type: object, attempt: int) -> Timer:
    """The little that is known of a claimed row that could not be read, enough to end it."""
    return Timer(
        id,
        namespace,
        key if isinstance(key, str) else "?",
        type if isinstance(type, str) else "?",
        None,
        None,
        _EPOCH,
        Status.RUNNING,
        attempt,
        attempt,
        _EPOCH,
        _EPOCH,
        _EPOCH,
    )


@dataclass(frozen=True, slots=True)
class Finish:
    """How the owner of one claimed attempt wants it to end.

    ``outcome`` RETRY/SNOOZED need ``run_at``. The store applies it only if the attempt is still
    the owner's (fencing); otherwise the finish is reported back as lost.
    """

    timer_id: int
    attempt: int
    outcome: Outcome
    error: str | None = None
    run_at: datetime | None = None
    traceback: str | None = None
    claim_token: int | None = None
    """The token of the claim that took this attempt (:attr:`Timer.claim_token`): the outcome
    lands only on that claim, never on a later claim of the same attempt number (one the
    database took again after a crash forgot the first). None: fenced by attempt and owner only
    (the worker always gives it)."""
    started_at: datetime | None = None
    """When the handler (or the delivery) began: the attempt's recorded start, and the timer's
    ``fired_at`` when it is its first. None: not known (the claim's instant is kept)."""


HeldRow = tuple[int, int | None]
"""A row a worker holds, as its heartbeat lists it: the timer id and the token of the claim it
holds the row by (:attr:`Timer.claim_token`; None: whichever claim)."""


@dataclass(frozen=True, slots=True)
class FanOut:
    """The owner of a claimed event hands it on: one delivery row per destination.

    Fenced like a :class:`Finish`; ``key`` is the event's, from which the deliveries' keys are
    made (see :func:`duetime.bus.routes.delivery_key`).
    """

    timer_id: int
    attempt: int
    key: str
    destinations: tuple[str, ...]
    claim_token: int | None = None
    """As :attr:`Finish.claim_token`."""


@dataclass(frozen=True, slots=True)
class Subscription:
    """What a node takes of one namespace: events whose type matches ``pattern`` (an exact type
    or a glob such as ``order.*``), for ``destinations`` (``handler`` = its Python handler)."""

    namespace: str
    pattern: str
    destinations: tuple[str, ...]

    def to_dict(self) -> dict[str, JSON]:
        return {"namespace": self.namespace, "type": self.pattern, "to": list(self.destinations)}

    @classmethod
    def from_dict(cls, data: Any) -> Subscription:
        return cls(data["namespace"], data["type"], tuple(data["to"]))


@dataclass(frozen=True, slots=True)
class ClaimFilter:
    """Which pending rows a node claims: events (no destination) whose type is in ``types`` or
    matches a glob of ``patterns``, and deliveries to one of ``destinations`` or, for the
    ``handler`` destination, of a type in ``handler_types``."""

    types: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()
    destinations: tuple[str, ...] = ()
    handler_types: tuple[str, ...] = ()

    @classmethod
    def of_types(cls, types: Sequence[str]) -> ClaimFilter:
        """Exact types with Python handlers: their events and their ``handler`` deliveries."""
        exact = tuple(types)
        return cls(types=exact, handler_types=exact)


@dataclass(frozen=True, slots=True)
class Node:
    """A running duetime process, alive while its heartbeat is fresh."""

    id: str
    host: str
    pid: int
    started_at: datetime
    heartbeat_at: datetime
    role: str = "worker"
    in_flight: int = 0
    subscriptions: tuple[Subscription, ...] = ()
    clock_offset: timedelta | None = None
    """The database's clock minus the node's wall clock at its last heartbeat (None: unknown,
    or the database runs on the node's own clock)."""

    def to_dict(self) -> dict[str, JSON]:
        return {
            "id": self.id,
            "host": self.host,
            "pid": self.pid,
            "role": self.role,
            "started_at": iso(self.started_at),
            "heartbeat_at": iso(self.heartbeat_at),
            "in_flight": self.in_flight,
            "subscriptions": [s.to_dict() for s in self.subscriptions],
            "clock_offset_ms": (
                None if self.clock_offset is None else self.clock_offset.total_seconds() * 1000
            ),
        }


@dataclass(frozen=True, slots=True)
class TimerFilter:
    """Which timers a listing (or a bulk action) takes; every field narrows it. ``type`` is an
    event type or a glob with ``*`` (``order.*``); the due range is ``[due_from, due_until)``."""

    subject: str | None = None
    status: Status | None = None
    type: str | None = None
    due_from: datetime | None = None
    due_until: datetime | None = None
    payload: PayloadMatch | None = None
    """Only timers whose payload holds this value at this path."""
    keys: tuple[str, ...] | None = None
    """Only these keys: a selection made row by row."""
    occurrence_prefix: str | None = None
    """Only the occurrences of one schedule: keys of this prefix followed by their instant
    (``schedule:<name>:``, see :func:`duetime.schedules.occurrence_key`)."""


@dataclass(frozen=True, slots=True)
class DeadType:
    """The dead letters of one event type: how many, and the newest one's death and error."""

    type: str
    count: int
    newest_at: datetime | None
    newest_error: str | None

    def to_dict(self) -> dict[str, JSON]:
        return {
            "type": self.type,
            "count": self.count,
            "newest_at": iso(self.newest_at),
            "newest_error": self.newest_error,
        }


BulkAction = Literal["cancel", "replay", "run_now", "delete"]
"""What a bulk action does to each timer its filter takes: cancel a pending one, replay a dead
one, make a pending one due now (``run_now``: retry now, or run early), or delete a finished
one (done, dead, cancelled or expired) with its attempts."""
BULK_ACTIONS: tuple[BulkAction, ...] = ("cancel", "replay", "run_now", "delete")
MAX_BULK_KEYS = 1000
"""Keys one bulk action may name (a selection); a larger set is a filter's job."""


HELD_AT = datetime(9999, 1, 1, tzinfo=UTC)
"""The ``run_at`` of a local-form timer stored by the SQL functions before duetime resolved its
wall time (PostgreSQL's zone rules may differ from duetime's): after every instant a timer may
be due at, so no claim takes it early; the materialiser gives it its instant."""


def iso(instant: datetime | None) -> str | None:
    """ISO 8601 in UTC with a 'Z', the one format duetime prints instants in."""
    if instant is None:
        return None
    return instant.isoformat().replace("+00:00", "Z")


CatchUp = Literal["latest", "all", "none"]


@dataclass(frozen=True, slots=True)
class Schedule:
    """A recurrence stored as data: each occurrence becomes an ordinary Timer.

    Exactly one of ``cron``, ``every`` and ``calendar`` is set. ``next_at`` is the next
    occurrence not yet materialised (None once ``end_at`` is past or the rule has ended: the
    schedule is finished); ``after_at`` is the
    instant through which every occurrence has been handled (fired or skipped by catch-up), so
    ``next_at`` is always the first occurrence after it. ``anchor_at`` is the grid of an
    interval without ``start_at``; ``last_at`` the last occurrence that became a timer.
    """

    id: int
    namespace: str
    name: str
    type: str
    payload: JSON
    subject: str | None
    cron: str | None
    every: timedelta | None
    timezone: str
    start_at: datetime | None
    end_at: datetime | None
    catch_up: CatchUp
    on_gap: str
    on_overlap: str
    active: bool
    max_attempts: int
    next_at: datetime | None
    after_at: datetime
    anchor_at: datetime
    last_at: datetime | None
    created_at: datetime
    updated_at: datetime
    version: int = 1
    overlap: str = "allow"
    """An occurrence due while an earlier one is unfinished: ``allow``, ``skip``,
    ``buffer_one`` (see :mod:`duetime.timemath.recurrence.overlap`)."""
    catch_up_grace: timedelta = timedelta(seconds=60)
    """How late an occurrence may be and still fire; past it, ``catch_up`` decides."""
    calendar: Calendar | None = None
    """An RFC 5545 rule (with DTSTART, EXDATE, RDATE, business days) instead of cron/every."""

    def to_dict(self) -> dict[str, JSON]:
        """A JSON-ready view (ISO 8601 instants with 'Z'; ``every`` and ``catch_up_grace`` in
        seconds)."""
        return {
            "id": self.id,
            "namespace": self.namespace,
            "name": self.name,
            "type": self.type,
            "payload": self.payload,
            "subject": self.subject,
            "cron": self.cron,
            "every": self.every.total_seconds() if self.every is not None else None,
            "timezone": self.timezone,
            "start_at": iso(self.start_at),
            "end_at": iso(self.end_at),
            "catch_up": self.catch_up,
            "catch_up_grace": self.catch_up_grace.total_seconds(),
            "overlap": self.overlap,
            "on_gap": self.on_gap,
            "on_overlap": self.on_overlap,
            "active": self.active,
            "max_attempts": self.max_attempts,
            "next_at": iso(self.next_at),
            "last_at": iso(self.last_at),
            "after_at": iso(self.after_at),
            "anchor_at": iso(self.anchor_at),
            "created_at": iso(self.created_at),
            "updated_at": iso(self.updated_at),
            "version": self.version,
            **calendar_fields(self.calendar),
        }
