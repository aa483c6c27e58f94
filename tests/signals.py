"""Test signals from a running worker: wait for what it did, not for time to pass.

A test that sleeps "long enough" for a worker to go to sleep, or to prove that nothing
fired, guesses; a busy machine makes the guess wrong. :class:`WorkerSignals` is a worker
observer (its hooks run on the worker's event loop) that wakes the test when the worker
reports something: a claim, an attempt finished, a round that found nothing more to claim.
"nothing happens" is then proved by the worker itself: it went idle, having claimed nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta

from duetime.model import Outcome, Timer
from duetime.worker import WorkerObserver


class WorkerSignals(WorkerObserver):
    """What a worker reported, and waits on it (add it to ``app.observers``)."""

    def __init__(self) -> None:
        self.claimed_count = 0
        self.started_keys: list[str] = []
        self.finished_keys: list[str] = []
        self.idle_rounds = 0
        self._waiters: list[asyncio.Future[None]] = []

    def claimed(self, namespace: str, count: int, seconds: float) -> None:
        self.claimed_count += count
        self._wake()

    def started(self, timer: Timer, attempt: int, lateness: timedelta) -> None:
        self.started_keys.append(timer.key)
        self._wake()

    def finished(self, timer: Timer, outcome: Outcome) -> None:
        self.finished_keys.append(timer.key)
        self._wake()

    def idle(self, namespace: str, next_due: datetime | None) -> None:
        self.idle_rounds += 1
        self._wake()

    async def until(self, check: Callable[[], bool], what: str, within: float = 60.0) -> None:
        """Wait until ``check`` holds, looking again each time the worker reports something;
        fail naming ``what`` after ``within`` s (only a worker that never gets there waits so
        long)."""
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(within):
                while not check():
                    waiter = loop.create_future()
                    self._waiters.append(waiter)
                    await waiter
        except TimeoutError:
            raise AssertionError(f"timed out after {within} s waiting for {what}") from None

    async def next_idle(self, within: float = 60.0) -> None:
        """Wait until the worker next finds nothing more to claim and goes to sleep: a round
        that begins after this call, so whatever was stored before it was seen."""
        rounds = self.idle_rounds
        await self.until(lambda: self.idle_rounds > rounds, "the worker to go idle", within)

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)
