"""When to claim ahead of an instant: how far ahead, and a fresh reading of the database's
clock for the rows held until it.

A claim made a little before a planned due instant takes its durable write off the timer's
lateness; how far ahead depends on how long recent claims took. Rows held until an instant are
started by the worker's reading of the database's clock, which must then be recent.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from datetime import timedelta

from duetime.clock import Clock, DatabaseClock
from duetime.worker import flow

log = logging.getLogger("duetime.worker")

CLAIM_AHEAD = timedelta(milliseconds=25)
"""How long before a planned due instant the worker claims it, at least (real clocks only).

The claim is a durable (fsynced) write; made ahead, its latency — a fraction of a millisecond
on an idle SSD, tens on a busy disk — is not added to the timer's lateness: the claimed timers
are held in memory and their handlers start at the due instant, never before it. When recent
claims (those of the last :data:`CLAIM_MEMORY`) took longer, the worker claims twice their
worst time ahead, up to :data:`MAX_CLAIM_AHEAD`. (Meanwhile the timer shows as ``running``:
cancelling it that close to its due instant is a conflict, as it would be a moment later.) The
claim made ahead of an instant also takes the rows due within this long after it, each held
until its own instant: timers due a millisecond apart cost a claim a window, not a claim each."""
MAX_CLAIM_AHEAD = timedelta(milliseconds=250)
CLAIM_MEMORY = 30.0
"""Seconds over which the slowest claim sets how far ahead the worker claims (see
:data:`CLAIM_AHEAD`).

A busy machine makes a claim slow now and then (the server's process waits for a core, a
commit for the disk), seconds apart. Remembered by count, the last 32 claims, a slow one was
forgotten within two seconds at 15 claims a second, and the next one as slow came back after
its rows' instants, which then started late: the slowest starts of all. Remembered for this
long, a slow claim still sets the margin when the next one comes."""
CLOCK_FRESH = 0.25
"""Seconds a reading of the database's clock may be old when the worker claims ahead of an
instant; an older one is renewed meanwhile (:data:`FRESH_SAMPLES` reads of
``clock_timestamp()``, beside the claim).

The worker's "now" is a lower bound of the database's clock: the last reading, aged by the most
this machine's clock may run fast (:data:`~duetime.clock.MAX_DRIFT`, 50 µs a second). Read
only at heartbeats (10 s apart) it lags 0.25 ms on average and 0.5 ms before the next one, and
a held row starts that much after its instant. Read within this long before the instant, the
ageing is under 13 µs; a reading that came back slowly is not used (the tighter one stays)."""
FRESH_SAMPLES = 3
"""Readings of the database's clock a renewal takes, the tightest kept (see :data:`CLOCK_FRESH`):
a reading is late by however long its answer took to come back, which a busy machine stretches
now and then; the quickest of a few is the one least stretched."""


class ClaimTiming:
    """How far ahead of an instant the producer claims (:data:`CLAIM_AHEAD`, stretched by the
    slowest recent claim), and the renewal of the clock's reading a claim ahead needs."""

    def __init__(self, claim_ahead: timedelta, clock: Clock) -> None:
        """``claim_ahead`` 0 turns claiming ahead off (a clock that is not real)."""
        self.claim_ahead = claim_ahead
        self.clock = clock
        self._slowest = SlowestRecent(CLAIM_MEMORY)  # how long recent claims took, at most
        self._clock_read: asyncio.Task[None] | None = None

    def took(self, at: float, seconds: float) -> None:
        """A claim answered at loop time ``at`` after ``seconds``."""
        self._slowest.add(at, seconds)

    def ahead(self, rated: bool) -> timedelta:
        """How long before a due instant to claim it: see :data:`CLAIM_AHEAD` (at most half
        the pacing while a rate is in force, ``rated``: see
        :data:`~duetime.worker.flow.RATE_START_DELAY`)."""
        if not self.claim_ahead:
            return self.claim_ahead
        recent = self._slowest.at(asyncio.get_running_loop().time())
        slowest = timedelta(seconds=2 * recent)
        ahead = min(max(self.claim_ahead, slowest), max(self.claim_ahead, MAX_CLAIM_AHEAD))
        if rated:
            ahead = min(ahead, flow.RATE_START_DELAY / 2)
        return ahead

    def freshen_clock(self, loop: asyncio.AbstractEventLoop) -> None:
        """Renew an old reading of the database's clock before rows are held until an instant
        by it (see :data:`CLOCK_FRESH`); the read runs beside the claim, not before it."""
        clock = self.clock
        if (
            not isinstance(clock, DatabaseClock)
            or clock.last is None  # not on the database's clock (or not synced yet)
            or clock.read_within(CLOCK_FRESH)
            or self._clock_read is not None
        ):
            return
        self._clock_read = loop.create_task(self._read_clock(clock))

    async def settle(self) -> None:
        """Wait for a renewal under way."""
        if self._clock_read is not None:
            await self._clock_read

    async def _read_clock(self, clock: DatabaseClock) -> None:
        try:
            await clock.sync(FRESH_SAMPLES)
        except Exception:  # the heartbeat's readings go on: this one was only to be tighter
            log.debug("reading the database's clock before an instant failed", exc_info=True)
        finally:
            self._clock_read = None


class SlowestRecent:
    """The greatest of the values added within the last ``window`` seconds (a sliding maximum:
    each value is kept only while no later one is as great, so the cost a value is constant)."""

    def __init__(self, window: float) -> None:
        self.window = window
        self._kept: deque[tuple[float, float]] = deque()  # (added at, value), values falling

    def add(self, at: float, value: float) -> None:
        kept = self._kept
        while kept and kept[-1][1] <= value:
            kept.pop()
        kept.append((at, value))

    def at(self, now: float) -> float:
        """The greatest value added since ``now - window`` (0.0: none)."""
        kept = self._kept
        while kept and kept[0][0] < now - self.window:
            kept.popleft()
        return kept[0][1] if kept else 0.0
