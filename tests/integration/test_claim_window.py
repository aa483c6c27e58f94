"""Timers due a few milliseconds apart (a stream of requests, each due soon after it came) are
claimed a window at a time — every row due within the claim-ahead after the first — and each
handler still starts at its own due instant, never before it."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

from test_worker_slots import wait_for

from duetime import AsyncApp, Event, TimerRequest
from duetime.model import Outcome, Timer

N = 40
SPACING = timedelta(milliseconds=3)


class Claims:
    """A worker observer that records the size of every claim."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    def claimed(self, namespace: str, count: int, seconds: float) -> None:
        if count:
            self.sizes.append(count)

    def started(self, timer: Timer, attempt: int, lateness: timedelta) -> None:
        pass

    def finished(self, timer: Timer, outcome: Outcome) -> None:
        pass

    def held_back(self, namespace: str, pattern: str) -> None:
        pass


def test_rows_due_within_the_claim_ahead_share_a_claim_and_start_on_time(
    tmp_path: Path,
) -> None:
    async def main() -> tuple[list[int], list[timedelta]]:
        claims = Claims()
        app = AsyncApp(f"sqlite:///{tmp_path / 'window.db'}", concurrency=100)
        app.observers.append(claims)
        early: list[timedelta] = []
        started: list[int] = []

        @app.handler("tick")
        async def tick(event: Event) -> None:
            now = datetime.now(UTC)
            started.append(event.payload["n"])
            if now < event.due_at:
                early.append(event.due_at - now)

        async with app:
            worker = app.worker()
            task = asyncio.create_task(worker.run())
            first = datetime.now(UTC) + timedelta(milliseconds=600)
            await app.schedule_many(
                [TimerRequest("tick", {"n": n}, at=first + n * SPACING) for n in range(N)]
            )
            try:
                await wait_for(lambda: len(started) == N, "every handler", 20)
            finally:
                worker.stop()
                await task
        assert sorted(started) == list(range(N))
        return claims.sizes, early

    sizes, early = asyncio.run(main())
    assert early == [], f"handlers started before their due instants: {early}"
    assert sum(sizes) == N
    # One claim an instant would be 40; a window of 25 ms over 3 ms steps takes about 9 rows.
    assert len(sizes) <= N // 2, f"claims of {sizes}: not a window at a time"
