"""The whole path on real SQLite: schedule → worker wakes on time → handler → done."""

from __future__ import annotations

import asyncio

from tests.signals import WorkerSignals

from duetime import AsyncApp, Event, Status


def test_worker_fires_timers_and_records_attempts(db_url: str) -> None:
    async def main() -> None:
        app = AsyncApp(db_url)
        seen: list[str] = []

        @app.handler("greet")
        async def greet(event: Event) -> None:
            seen.append(event.key)

        signals = WorkerSignals()
        app.observers.append(signals)
        async with app:
            first = await app.schedule("greet", {"n": 1}, delay=0.2, key="a", subject="u1")
            assert first.action == "created"
            again = await app.schedule("greet", {"n": 2}, delay=0.1, key="a", subject="u1")
            assert again.action == "updated"
            worker = app.worker()
            task = asyncio.create_task(worker.run())
            await signals.until(lambda: seen == ["a"], "the first timer to fire")
            await signals.next_idle()  # asleep: only the new timer's wake-up brings it back
            await app.schedule("greet", {}, delay=0.05, key="b")
            try:
                await signals.until(lambda: len(seen) == 2, "the second timer to fire")
            finally:
                worker.stop()
            await task
            assert seen == ["a", "b"]
            timer = await app.get("a")
            assert timer.status is Status.DONE
            assert timer.payload == {"n": 2}
            attempts = await app.timers.attempts("a")
            assert [a.outcome for a in attempts] == ["done"]
            kept = await app.schedule("greet", {"n": 3}, delay=1, key="a")
            assert kept.action == "kept"
            assert kept.timer.payload == {"n": 2}

    asyncio.run(main())
