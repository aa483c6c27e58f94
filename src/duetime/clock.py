"""The clock seam: everything asks a ``Clock`` for "now", so tests pin time instead of sleeping."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The current instant, timezone-aware UTC."""
        ...


class SystemClock:
    """Wall-clock time of this machine (for SQLite, the database's clock is this one)."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class FrozenClock:
    """A clock that moves only when told to: ``advance`` / ``set``.

    Waiters registered with :meth:`changed` are woken when time moves, so a worker sleeping
    "until the next due instant" under a frozen clock reacts to ``advance`` at once.
    """

    def __init__(self, start: datetime | None = None) -> None:
        start = start or datetime(2025, 1, 1, tzinfo=UTC)
        if start.tzinfo is None:
            raise ValueError("FrozenClock needs an aware datetime")
        self._now = start.astimezone(UTC)
        self._listeners: list[asyncio.Event] = []

    def now(self) -> datetime:
        return self._now

    def set(self, instant: datetime) -> None:
        if instant.tzinfo is None:
            raise ValueError("FrozenClock.set needs an aware datetime")
        self._now = instant.astimezone(UTC)
        for event in self._listeners:
            event.set()

    def advance(self, delta: timedelta | float) -> datetime:
        if not isinstance(delta, timedelta):
            delta = timedelta(seconds=delta)
        self.set(self._now + delta)
        return self._now

    def subscribe(self, event: asyncio.Event) -> None:
        """Set ``event`` whenever time moves, until :meth:`unsubscribe`."""
        self._listeners.append(event)

    def unsubscribe(self, event: asyncio.Event) -> None:
        """Stop setting ``event``: a clock outlives the many workers a test runs on it."""
        with contextlib.suppress(ValueError):
            self._listeners.remove(event)


def watch(clock: Clock, event: asyncio.Event) -> None:
    """Set ``event`` whenever ``clock`` is moved by hand (only a test clock is); pair with
    :func:`unwatch`. Clocks without ``subscribe`` never jump, so there is nothing to hear."""
    subscribe = getattr(clock, "subscribe", None)
    if subscribe is not None:
        subscribe(event)


def unwatch(clock: Clock, event: asyncio.Event) -> None:
    """Undo :func:`watch`, so a finished worker is not kept alive by the clock it ran on."""
    unsubscribe = getattr(clock, "unsubscribe", None)
    if unsubscribe is not None:
        unsubscribe(event)
