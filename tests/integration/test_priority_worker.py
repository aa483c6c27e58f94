"""Priority end to end on real SQLite: urgent events scheduled behind an overdue backlog start
before that backlog drains, in priority order."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from tests.waiting import until

from duetime import AsyncApp, Event, TimerRequest

BACKLOG = 400


def test_urgent_events_start_before_the_backlog_drains(db_url: str) -> None:
    async def main() -> None:
        app = AsyncApp(db_url, concurrency=4, batch_size=20)
        started: list[str] = []

        @app.handler("work")
        async def work(event: Event) -> None:
            started.append(event.key)
            await asyncio.sleep(0.001)

        async with app:
            hour_ago = datetime.now(UTC) - timedelta(hours=1)
            backlog = [
                TimerRequest("work", key=f"old-{i}", at=hour_ago + timedelta(seconds=i))
                for i in range(BACKLOG)
            ]
            await app.timers.schedule_many(backlog)
            for level in (3, 9, 5):  # due after the whole backlog, and urgent
                await app.schedule("work", key=f"urgent-{level}", delay=0, priority=level)
            worker = app.worker()
            task = asyncio.create_task(worker.run())
            try:
                await until(lambda: len(started) == BACKLOG + 3, 60, "every timer to start")
            finally:
                worker.stop()
            await task
        assert sorted(started) == sorted([*(f"old-{i}" for i in range(BACKLOG)),
                                          "urgent-3", "urgent-5", "urgent-9"])  # fmt: skip
        urgent = [key for key in started if key.startswith("urgent")]
        assert urgent == ["urgent-9", "urgent-5", "urgent-3"]
        # All three in the first claim (of 20): they start before the 21st event does.
        assert max(started.index(key) for key in urgent) < 20, started[:25]

    asyncio.run(main())
