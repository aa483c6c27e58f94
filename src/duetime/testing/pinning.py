"""Pinning a harness's clock: where it starts, and the moves a test makes with it.

Time moves only when a test says so, and only in ways a reader can check: forward by a
duration, or to a named instant (or a wall-clock time in a zone, with scheduling's DST rules).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from duetime.clock import Clock, FrozenClock, SystemClock
from duetime.timemath.durations import add_duration, parse_duration
from duetime.timemath.when import resolve_when


def instant(value: datetime | str, field: str) -> datetime:
    """An aware instant in UTC from a datetime or ISO 8601 text; ``field`` names it in errors."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(f"{field}: {value!r} is not an ISO 8601 instant") from None
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{field}: {value!s} has no UTC offset; give an aware instant")
    return value.astimezone(UTC)


def iso(at: datetime) -> str:
    """An instant as failure messages show it: ISO 8601 with a 'Z'."""
    return at.isoformat().replace("+00:00", "Z")


def start_at(start: datetime | str | None) -> datetime:
    """Where a new frozen clock starts: ``start``, or this second on the machine's clock."""
    if start is None:
        return SystemClock().now().replace(microsecond=0)
    return instant(start, "start")


def freeze(current: Clock, start: datetime | str | None) -> FrozenClock:
    """The frozen clock for an app: its own if it has one (moved to ``start``), else a new one."""
    if isinstance(current, FrozenClock):
        if start is not None:
            current.set(instant(start, "start"))
        return current
    return FrozenClock(start_at(start))


def _advanced(now: datetime, delta: timedelta | float | str) -> datetime:
    if isinstance(delta, str):
        return add_duration(now, parse_duration(delta, "delta"), None, "compatible", "delta")
    if not isinstance(delta, timedelta):
        delta = timedelta(seconds=delta)
    if delta < timedelta(0):
        raise ValueError("advance() moves forward only; use travel_to() to go back")
    return now + delta


def _destination(now: datetime, when: datetime | str, timezone: str | None) -> datetime:
    if timezone is None:
        return instant(when, "instant")
    return resolve_when(now=now, local=when, timezone=timezone).due_at


class PinnedTime:
    """The time half of a harness, the same whether the app blocks or awaits."""

    clock: FrozenClock

    @property
    def now(self) -> datetime:
        """The pinned instant (UTC)."""
        return self.clock.now()

    def advance(self, delta: timedelta | float | str) -> datetime:
        """Move the clock forward by a timedelta, seconds, or an ISO 8601 duration ('P1D')."""
        self.clock.set(_advanced(self.clock.now(), delta))
        return self.clock.now()

    def travel_to(self, when: datetime | str, *, timezone: str | None = None) -> datetime:
        """Pin the clock at an aware instant, or at wall-clock ``when`` in ``timezone``."""
        self.clock.set(_destination(self.clock.now(), when, timezone))
        return self.clock.now()
