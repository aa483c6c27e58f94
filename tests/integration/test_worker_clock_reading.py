"""A worker holding rows for an instant holds them by a fresh reading of the database's clock.

Its "now" is the last reading aged by the most this machine's clock may drift, so an old reading
makes a held row start late by that ageing; the claim made ahead of an instant renews a reading
older than :data:`~duetime.worker.claim_timing.CLOCK_FRESH`. Here the "database" answers this
machine's wall clock (SQLite stores the rows), and every reading is noted with when it was taken.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from duetime import AsyncApp, Event
from duetime.clock import DatabaseClock, elapsed_seconds
from duetime.worker.claim_timing import CLOCK_FRESH, FRESH_SAMPLES, MAX_CLAIM_AHEAD

DELAY = 1.0
"""Seconds from the worker's start to the timer's instant: the start's readings are older than
:data:`CLOCK_FRESH` by then, and the heartbeat's next is seconds away."""


def test_a_claim_ahead_of_an_instant_renews_an_old_reading(db_url: str) -> None:
    reads: list[float] = []

    async def read() -> datetime:
        reads.append(elapsed_seconds())
        return datetime.now(UTC)

    clock = DatabaseClock(read)

    async def main() -> None:
        app = AsyncApp(db_url, clock=clock)
        began: list[tuple[float, int]] = []
        ran = asyncio.Event()

        @app.handler("tick")
        async def tick(event: Event) -> None:
            began.append((elapsed_seconds(), len(reads)))
            ran.set()

        async with app:
            await app.schedule("tick", {}, delay=DELAY, key="k")
            scheduled = len(reads)
            worker = app.worker()
            task = asyncio.create_task(worker.run())
            await asyncio.wait_for(ran.wait(), timeout=30)
            worker.stop()
            await task
        (at, seen), *_ = began
        assert seen >= scheduled + FRESH_SAMPLES
        # The latest reading before the start was taken as the claim went out, a claim-ahead
        # before the instant at most (not at the worker's start, a second before).
        ahead = MAX_CLAIM_AHEAD.total_seconds()
        assert at - reads[seen - 1] < ahead + CLOCK_FRESH

    asyncio.run(main())
