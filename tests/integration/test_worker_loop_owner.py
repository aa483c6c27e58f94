"""A worker's state is touched only on its event loop, whatever thread a handler runs in.

Sync handlers run in threads; what they produce (the instant one began, its result) must
travel back to the loop and be applied there. The worker's setters check the thread they run
on while ``duetime.worker.owner.CHECKING`` is on (the suite's conftest turns it on): a write
from a handler thread raises there, is kept in ``owner.VIOLATIONS``, and fails the test.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from tests.waiting import run

from duetime import AsyncApp, Event, Status, TimerRequest
from duetime.model import Outcome, Timer
from duetime.worker import WorkerObserver, owner

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from storekit import pooled_pg_url


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'owner.db'}"
        return
    with pooled_pg_url() as found:
        yield found


class Threads(WorkerObserver):
    """The thread each hook ran on."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self.finished_count = 0
        self.all_finished = asyncio.Event()
        self.expected = 0

    def started(self, timer: Timer, attempt: int, lateness: timedelta) -> None:
        self.seen.add(threading.current_thread().name)

    def finished(self, timer: Timer, outcome: Outcome) -> None:
        self.seen.add(threading.current_thread().name)
        self.finished_count += 1
        if self.finished_count == self.expected:
            self.all_finished.set()


class Idle(WorkerObserver):
    """Sets ``event`` once the worker has gone to sleep with nothing to claim."""

    def __init__(self, event: asyncio.Event) -> None:
        self.event = event

    def idle(self, namespace: str, next_due: datetime | None) -> None:
        self.event.set()


def test_what_sync_handlers_produce_is_applied_on_the_loop(url: str) -> None:
    count = 30
    handler_threads: set[str] = set()
    fired: list[datetime | None] = []

    async def main() -> None:
        threads = Threads()
        threads.expected = count
        app = AsyncApp(url, "ns", concurrency=8)
        app.observers.append(threads)

        @app.handler("work")
        def work(event: Event) -> None:
            handler_threads.add(threading.current_thread().name)
            fired.append(event.fired_at)

        keys = [f"w-{i}" for i in range(count)]
        async with app:
            await app.timers.schedule_many(
                [TimerRequest("work", None, delay=0, key=k) for k in keys]
            )
            worker = app.worker()
            loop_thread = threading.current_thread().name
            running = asyncio.create_task(worker.run())
            await asyncio.wait_for(threads.all_finished.wait(), 60)
            worker.stop()
            await running
            for key in keys:
                timer = await app.get(key)
                assert timer.status is Status.DONE
                assert timer.fired_at is not None  # the start the thread sent back was recorded
        assert handler_threads
        assert len(fired) == count
        assert None not in fired  # the event says when it fired, as the stored timer does
        assert loop_thread not in handler_threads
        assert threads.seen == {loop_thread}
        assert worker.stats.outcomes == {"done": count}
        assert owner.VIOLATIONS == []

    run(main, within=120)


def test_a_wakeup_heard_on_another_thread_is_applied_on_the_loop(url: str) -> None:
    async def main() -> None:
        app = AsyncApp(url, "ns")
        done, idle = asyncio.Event(), asyncio.Event()
        app.observers.append(Idle(idle))

        @app.handler("work")
        async def work(event: Event) -> None:
            done.set()

        async with app:
            worker = app.worker()
            running = asyncio.create_task(worker.run())
            await asyncio.wait_for(idle.wait(), 60)  # running: a store's hints reach it now
            later = datetime.now().astimezone() + timedelta(hours=1)
            thread = threading.Thread(target=worker.producer.on_wakeup, args=(later,))
            thread.start()
            await asyncio.to_thread(thread.join)
            await app.schedule("work", None, delay=0, key="after-hint")
            await asyncio.wait_for(done.wait(), 60)
            worker.stop()
            await running
        assert owner.VIOLATIONS == []

    run(main, within=120)


def test_a_write_off_the_loop_is_caught() -> None:
    """The check itself: a setter called from a thread raises and is kept."""
    from duetime.worker.slots import Slots

    async def main() -> None:
        slots = Slots(2, 2)
        bound = owner.LoopOwner()
        bound.bind(asyncio.get_running_loop())
        slots._owner = bound  # as the worker binds its parts when it starts
        slots.awaiting()  # on the loop: fine
        errors: list[BaseException] = []

        def off_loop() -> None:
            try:
                slots.awaiting()
            except owner.OffLoop as exc:
                errors.append(exc)

        thread = threading.Thread(target=off_loop, name="not-the-loop")
        thread.start()
        await asyncio.to_thread(thread.join)
        assert len(errors) == 1
        assert owner.VIOLATIONS == ["Slots.awaiting from thread not-the-loop"]
        owner.VIOLATIONS.clear()
        assert slots.unwritten == 1

    asyncio.run(main())
