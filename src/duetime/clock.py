"""The clock seam: everything asks a ``Clock`` for "now", so tests pin time instead of sleeping.

In production "now" is the database's clock (:class:`DatabaseClock`): on PostgreSQL every
worker, API and producer compares due instants and leases with the same clock, whatever its own
machine's says.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
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


def elapsed_seconds() -> float:
    """Seconds on a clock that only moves forward and is never stepped (NTP, ``date -s``), and
    that goes on counting while the machine is suspended where the system offers one."""
    return time.clock_gettime(_ELAPSED)


_ELAPSED = getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC)

SYNC_SAMPLES = 5
"""Readings of the database's clock per sync."""
MAX_DRIFT = 50e-6
"""The most this machine's elapsed clock may run fast against the database's (50 ppm: an
undisciplined crystal; NTP keeps both far closer): a reading kept for a while is aged by it, so
it stays a lower bound."""
ROUNDING = 1e-5
"""Seconds of slack for the server's microsecond timestamps and float sums."""
KEEP_READING = 60.0
"""Seconds a reading may stay the anchor while newer ones are looser (a busy moment's round
trips are long; an older, tight one, aged by :data:`MAX_DRIFT`, is the better bound)."""


@dataclass(frozen=True, slots=True)
class ClockReading:
    """One sync: the database's clock against this machine's."""

    offset: timedelta
    """The database's clock minus this machine's wall clock (positive: ours is behind)."""
    uncertainty: timedelta
    """The shortest round trip of the sync: the database's clock is known to within it."""


class DatabaseClock:
    """The database server's clock, as this process can know it.

    :meth:`sync` reads the server's clock (``read``) and anchors it to a clock of this machine
    that is never stepped: "now" is then that reading plus the time elapsed since, so neither
    a skewed wall clock nor a step of it (NTP, suspend/resume) moves it. Each reading is taken
    as the server's value at the *end* of its round trip and aged by :data:`MAX_DRIFT`, which
    makes "now" a lower bound of the server's clock: a worker may start a timer a round trip
    late, never early. Of the readings of the last :data:`KEEP_READING` seconds the tightest
    bound is the anchor, so one sync at a busy moment (long round trips) does not make every
    timer start late until the next. "Now" never goes back, unless the server's clock did: an
    instant read after another (an attempt's start after its claim) is never earlier.

    Until the first sync, and when ``read`` answers None (the database runs on this machine's
    clock: SQLite), "now" is this machine's wall clock, read afresh each time.
    """

    def __init__(
        self,
        read: Callable[[], Awaitable[datetime | None]],
        *,
        elapsed: Callable[[], float] = elapsed_seconds,
        wall: Callable[[], datetime] | None = None,
    ) -> None:
        self._read = read
        self._elapsed = elapsed
        self._wall = wall or (lambda: datetime.now(UTC))
        # (elapsed at a reading, the server's clock then as a POSIX timestamp): floats, because
        # "now" is read a few times a job and a float sum is cheaper than datetime arithmetic.
        self._anchor: tuple[float, float] | None = None
        # The latest "now" given (a POSIX timestamp): a later one is never earlier, so that an
        # instant read after another (an attempt's start after its claim) never comes before
        # it, though a new anchor may be a lower bound than the old one aged to this moment.
        self._given = 0.0
        self.last: ClockReading | None = None
        """The latest sync (None before one, or when the database uses this machine's clock)."""
        self.read_at: float | None = None
        """When (on the elapsed clock) the latest reading was taken; None before one."""

    @property
    def offset(self) -> timedelta | None:
        return None if self.last is None else self.last.offset

    def now(self) -> datetime:
        anchor = self._anchor
        if anchor is None:
            return self._wall()
        # Less a microsecond: fromtimestamp rounds to the nearest one, never up past the bound.
        at = _bound(anchor, self._elapsed()) - 1e-6
        if at < self._given:
            at = self._given  # still a lower bound: the server's clock was past it before
        else:
            self._given = at
        return datetime.fromtimestamp(at, UTC)

    async def sync(
        self,
        samples: int = SYNC_SAMPLES,
        read: Callable[[], Awaitable[datetime | None]] | None = None,
    ) -> ClockReading | None:
        """Read the server's clock ``samples`` times; keep the tightest bound as the anchor.

        ``read`` (default: the one given at construction) may read it inside another round's
        transaction — a heartbeat's — so keeping the clock fresh costs no transaction of its
        own; only that statement's round trip is timed, so the reading is as tight."""
        read = read or self._read
        best: tuple[float, float, datetime, datetime] | None = None
        for _ in range(samples):
            wall_before, sent = self._wall(), self._elapsed()
            server = await read()
            received = self._elapsed()
            self.read_at = received
            if server is None:
                self._anchor = self.last = None
                return None
            trip = received - sent
            if best is None or trip < best[0]:
                best = (trip, received, server, wall_before + timedelta(seconds=trip / 2))
        assert best is not None
        trip, received, server, wall_midway = best
        fresh = (received, server.timestamp())
        kept = self._anchor
        # The kept reading says the server's clock is later than this read allows. One steady
        # clock cannot do that; another server (a failover) or a clock stepped back can, and
        # the server now answering is the authority: "now" goes back with it.
        stepped_back = kept is not None and _bound(kept, received) > fresh[1] + trip + ROUNDING
        if (
            kept is None
            or received - kept[0] > KEEP_READING
            or _bound(fresh, received) >= _bound(kept, received)
            or stepped_back
        ):
            if stepped_back:
                self._given = 0.0
            self._anchor = fresh
        self.last = ClockReading(server - wall_midway, timedelta(seconds=trip))
        return self.last

    async def sample(self, read: Callable[[], Awaitable[datetime | None]]) -> None:
        """One reading through ``read`` (see :meth:`sync`), as a heartbeat takes it."""
        await self.sync(1, read)

    def read_within(self, seconds: float) -> bool:
        """Whether the clock was read in the last ``seconds`` (by a sync or a heartbeat)."""
        return self.read_at is not None and self._elapsed() - self.read_at <= seconds


def _bound(anchor: tuple[float, float], elapsed: float) -> float:
    """The server's clock at ``elapsed``, at least (a POSIX timestamp): the anchor's reading
    plus the time since, less the most this machine's clock may have gained meanwhile."""
    since, server = anchor
    return server + (elapsed - since) * (1 - MAX_DRIFT)


def is_real(clock: Clock) -> bool:
    """Whether ``clock`` follows real time on its own (a test clock moves only when told)."""
    return isinstance(clock, SystemClock | DatabaseClock)


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
