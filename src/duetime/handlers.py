"""Handlers: Python functions registered per event type, and the envelope they receive."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, fields
from datetime import datetime
from typing import TYPE_CHECKING, Any

from duetime.bus.routes import HANDLER, event_key
from duetime.model import JSON, Timer, iso
from duetime.support.threads import HANDLER_THREADS
from duetime.validation import check_type

if TYPE_CHECKING:
    from duetime.store.parts import TransactionStore


@dataclass(frozen=True, slots=True)
class Event:
    """What a handler (and, as JSON, every destination) receives: the envelope of one delivery.

    ``key`` is the caller's idempotency key and ``message_id`` (``<namespace>:<key>:<destination>``)
    the id of this event's delivery to this destination: both are the same on every attempt, so
    receivers deduplicate redeliveries by them. ``redelivery`` counts the attempts before this
    one (``attempt - 1``). ``emitted_at`` is when the event was stored, ``producer`` who stored
    it (a node id, ``api``, ``cli``; None when unknown), ``destination`` where this delivery goes
    (``handler`` for a Python handler). ``id`` is the row being delivered: the event's own, or,
    once it fanned out, its delivery row's.
    """

    id: int
    namespace: str
    key: str
    type: str
    payload: JSON
    subject: str | None
    due_at: datetime
    attempt: int
    max_attempts: int
    correlation_id: str | None
    fired_at: datetime | None
    emitted_at: datetime | None = None
    producer: str | None = None
    destination: str = HANDLER

    @property
    def redelivery(self) -> int:
        return self.attempt - 1

    @property
    def message_id(self) -> str:
        return f"{self.namespace}:{self.key}:{self.destination}"

    @classmethod
    def from_timer(cls, timer: Timer, attempt: int, destination: str = HANDLER) -> Event:
        """The envelope of ``timer``'s attempt; a delivery row's own destination wins over
        ``destination`` (which says where an event delivered as it is goes).

        One per delivery, on the worker's hot path: the fields are set through their slots,
        which costs a third of the frozen dataclass's ``__init__``.
        """
        key = timer.key
        if timer.destination is not None:
            key = event_key(key, timer.destination)
            destination = timer.destination
        event = _new(cls)
        _set_id(event, timer.id)
        _set_namespace(event, timer.namespace)
        _set_key(event, key)
        _set_type(event, timer.type)
        _set_payload(event, timer.payload)
        _set_subject(event, timer.subject)
        _set_due_at(event, timer.due_at)
        _set_attempt(event, attempt)
        _set_max_attempts(event, timer.max_attempts)
        _set_correlation_id(event, timer.correlation_id)
        _set_fired_at(event, timer.fired_at)
        _set_emitted_at(event, timer.registered_at)
        _set_producer(event, timer.producer)
        _set_destination(event, destination)
        return event

    def to_dict(self) -> dict[str, JSON]:
        return {
            "id": self.id,
            "namespace": self.namespace,
            "key": self.key,
            "type": self.type,
            "payload": self.payload,
            "subject": self.subject,
            "due_at": iso(self.due_at),
            "attempt": self.attempt,
            "max_attempts": self.max_attempts,
            "correlation_id": self.correlation_id,
            "fired_at": iso(self.fired_at),
            "emitted_at": iso(self.emitted_at),
            "producer": self.producer,
            "destination": self.destination,
            "redelivery": self.redelivery,
            "message_id": self.message_id,
        }


_new = object.__new__
(
    _set_id,
    _set_namespace,
    _set_key,
    _set_type,
    _set_payload,
    _set_subject,
    _set_due_at,
    _set_attempt,
    _set_max_attempts,
    _set_correlation_id,
    _set_fired_at,
    _set_emitted_at,
    _set_producer,
    _set_destination,
) = (
    getattr(Event, name).__set__
    for name in (
        "id",
        "namespace",
        "key",
        "type",
        "payload",
        "subject",
        "due_at",
        "attempt",
        "max_attempts",
        "correlation_id",
        "fired_at",
        "emitted_at",
        "producer",
        "destination",
    )
)
if len(fields(Event)) != 14:  # pragma: no cover - a new field must be set above too
    raise RuntimeError("Event.from_timer must set every field of Event")


@dataclass(frozen=True, slots=True)
class Handler:
    """A registered handler: async ones run on the loop, sync ones in a worker thread.

    A ``transactional`` handler is called as ``func(event, connection)`` inside the database
    transaction that also marks its timer done, so its own writes and the completion commit
    together or not at all (exactly-once effects).
    """

    type: str
    func: Callable[..., Any]
    is_async: bool
    transactional: bool = False
    destination: str = HANDLER
    """Where it delivers: ``handler``, or the name of the destination it wraps."""
    transactions: TransactionStore | None = None
    """Where a transactional handler's writes and its completion commit: the store's own
    transaction when None, else another one on the same database (e.g. a web framework's
    connection, so its ORM's writes are among them: see duetime.contrib.django)."""

    async def __call__(self, event: Event, may_start: Callable[[], bool] | None = None) -> Any:
        """Run it on ``event``. ``may_start`` (sync handlers): asked in the thread right before the
        call, which raises :class:`~duetime.support.threads.NotStarted` instead when it says no;
        whatever else the call raises arrives as an Exception
        (:class:`~duetime.support.threads.Escaped` for one that is not)."""
        if self.is_async:
            return await self.func(event)
        return await HANDLER_THREADS.run(self.func, event, may_start=may_start)


class HandlerRegistry:
    """Event type → handler. One handler per type; registering a type twice is a mistake."""

    def __init__(self) -> None:
        self._handlers: dict[str, Handler] = {}

    def register(
        self,
        type: str,
        func: Callable[..., Any],
        *,
        transactional: bool = False,
        transactions: TransactionStore | None = None,
    ) -> Handler:
        """``transactions`` (transactional handlers only): see :attr:`Handler.transactions`."""
        check_type(type)
        if type in self._handlers:
            raise ValueError(f"a handler for {type!r} is already registered")
        if not callable(func):
            raise TypeError("a handler must be callable")
        if transactions is not None and not transactional:
            raise ValueError("transactions= is for transactional handlers only")
        handler = Handler(
            type,
            func,
            inspect.iscoroutinefunction(func),
            transactional,
            transactions=transactions,
        )
        self._handlers[type] = handler
        return handler

    def get(self, type: str) -> Handler | None:
        return self._handlers.get(type)

    def all(self) -> list[Handler]:
        return list(self._handlers.values())

    @property
    def types(self) -> list[str]:
        return sorted(self._handlers)

    def __len__(self) -> int:
        return len(self._handlers)
