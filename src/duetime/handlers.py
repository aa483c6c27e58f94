"""Handlers: Python functions registered per event type, and the envelope they receive."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from duetime.model import JSON, Timer, iso
from duetime.validation import check_type


@dataclass(frozen=True, slots=True)
class Event:
    """What a handler receives: the timer's content plus this attempt's number.

    ``id`` and ``key`` are stable across attempts, so a receiver can deduplicate redeliveries.
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

    @classmethod
    def from_timer(cls, timer: Timer, attempt: int) -> Event:
        return cls(
            id=timer.id,
            namespace=timer.namespace,
            key=timer.key,
            type=timer.type,
            payload=timer.payload,
            subject=timer.subject,
            due_at=timer.due_at,
            attempt=attempt,
            max_attempts=timer.max_attempts,
            correlation_id=timer.correlation_id,
            fired_at=timer.fired_at,
        )

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
        }


HandlerFunc = Callable[[Event], Any] | Callable[[Event], Awaitable[Any]]


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

    async def __call__(self, event: Event) -> Any:
        if self.is_async:
            return await self.func(event)
        return await asyncio.to_thread(self.func, event)


class HandlerRegistry:
    """Event type → handler. One handler per type; registering a type twice is a mistake."""

    def __init__(self) -> None:
        self._handlers: dict[str, Handler] = {}

    def register(
        self, type: str, func: Callable[..., Any], *, transactional: bool = False
    ) -> Handler:
        check_type(type)
        if type in self._handlers:
            raise ValueError(f"a handler for {type!r} is already registered")
        if not callable(func):
            raise TypeError("a handler must be callable")
        handler = Handler(type, func, inspect.iscoroutinefunction(func), transactional)
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
