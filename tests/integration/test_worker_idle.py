"""The ``idle`` observer hook: a worker says when it goes to sleep with nothing to claim, and
what it sleeps towards; observers without the hook, or whose hook fails, do not stop it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from tests.waiting import run

from duetime import AsyncApp, Event
from duetime.model import Outcome, Timer
from duetime.worker.observing import WorkerObserver


class Sleeps(WorkerObserver):
    """Remembers each ``idle`` call, and the finished attempts between them."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, datetime | None]] = []
        self.changed = asyncio.Event()

    def finished(self, timer: Timer, outcome: Outcome) -> None:
        self.seen.append(("finished", timer.key, None))
        self.changed.set()

    def idle(self, namespace: str, next_due: datetime | None) -> None:
        self.seen.append(("idle", namespace, next_due))
        self.changed.set()

    def idles(self) -> list[datetime | None]:
        return [next_due for name, _, next_due in self.seen if name == "idle"]

    async def until(self, check: Callable[[], bool]) -> None:
        """Until ``check`` holds after a call (the test's own bound applies)."""
        while not check():
            self.changed.clear()
            await self.changed.wait()


class WithoutIdle:
    """An observer written before the hook existed: the worker gives it the default."""

    def __init__(self) -> None:
        self.finished_keys: list[str] = []

    def claimed(self, namespace: str, count: int, seconds: float) -> None:
        return None

    def started(self, timer: Timer, attempt: int, lateness: timedelta) -> None:
        return None

    def finished(self, timer: Timer, outcome: Outcome) -> None:
        self.finished_keys.append(timer.key)

    def held_back(self, namespace: str, pattern: str) -> None:
        return None


class Failing(WorkerObserver):
    def idle(self, namespace: str, next_due: datetime | None) -> None:
        raise RuntimeError("a broken metrics hook")


def test_the_worker_reports_each_sleep_with_what_it_sleeps_towards(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> None:
        app = AsyncApp(db_url, "ns")
        ran: list[str] = []

        @app.handler("greet")
        async def greet(event: Event) -> None:
            ran.append(event.key)

        sleeps, old, failing = Sleeps(), WithoutIdle(), Failing()
        async with app:
            far = await app.schedule("greet", None, at=datetime.now(UTC) + timedelta(hours=1))
            app.observers.extend([failing, old, sleeps])
            worker = app.worker()
            task = asyncio.create_task(worker.run())
            await sleeps.until(lambda: len(sleeps.idles()) == 1)
            assert sleeps.seen == [("idle", "ns", far.timer.due_at)]

            soon = await app.schedule("greet", None, delay=0.05, key="soon")

            def ran_and_asleep_again() -> bool:
                idles = sleeps.idles()
                finished = ("finished", "soon", None) in sleeps.seen
                return finished and len(idles) >= 2 and idles[-1] == far.timer.due_at

            await sleeps.until(ran_and_asleep_again)
            worker.stop()
            await task

        assert ran == ["soon"]
        # Between the two, it may have slept towards the one due soon (until it was due).
        assert set(sleeps.idles()[1:-1]) <= {soon.timer.due_at}
        assert old.finished_keys == ["soon"]
        failures = [r for r in caplog.records if "failed on going idle" in r.getMessage()]
        assert len(failures) >= 2  # logged each time, and the worker carried on

    with caplog.at_level(logging.ERROR, logger="duetime.worker"):
        run(main)


def test_a_worker_with_nothing_pending_reports_no_next_due(db_url: str) -> None:
    async def main() -> None:
        app = AsyncApp(db_url, "ns")

        @app.handler("greet")
        async def greet(event: Event) -> None:
            return None

        sleeps = Sleeps()
        async with app:
            app.observers.append(sleeps)
            worker = app.worker()
            task = asyncio.create_task(worker.run())
            await sleeps.until(lambda: len(sleeps.idles()) == 1)
            worker.stop()
            await task
        assert sleeps.seen[0] == ("idle", "ns", None)

    run(main)
