"""A worker's slots on real SQLite: how many handlers run at once, how many outcomes may wait
for their write, and what happens to timers claimed ahead of a free slot."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.waiting import until

from duetime import AsyncApp, Event, Status, TimerRequest
from duetime.model import Finish
from duetime.store import create_store

CONCURRENCY = 5
BATCH = 20


class HeldFinishStore:
    """The real store, except that ``finish`` waits while ``hold`` is set, and counts what it
    has recorded."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.hold = asyncio.Event()
        self.released = asyncio.Event()
        self.released.set()
        self.recorded = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def finish(self, finishes: Sequence[Finish], node_id: str, now: datetime) -> set[int]:
        if self.hold.is_set():
            await self.released.wait()
        lost: set[int] = await self._inner.finish(finishes, node_id, now)
        self.recorded += len(finishes)
        return lost


async def wait_for(condition: Any, what: str, seconds: float = 60.0) -> None:
    await until(condition, seconds, what, every=0.01)


def test_handlers_run_up_to_concurrency_and_unwritten_outcomes_hold_them_back(
    tmp_path: Path,
) -> None:
    """``concurrency`` handlers at most run at once; while the store does not answer, outcomes
    pile up to ``batch_size`` and then no handler starts: at most ``concurrency + batch_size``
    timers are started and unrecorded (the most a crash runs again). Once the store answers,
    everything is done."""

    async def main() -> None:
        url = f"sqlite:///{tmp_path / 'slots.db'}"
        store = HeldFinishStore(create_store(url))
        app = AsyncApp(url, store=store, concurrency=CONCURRENCY, batch_size=BATCH)
        running = most_running = started = 0
        most_unrecorded = 0

        @app.handler("job")
        async def job(event: Event) -> None:
            nonlocal running, most_running, started, most_unrecorded
            started += 1
            running += 1
            most_running = max(most_running, running)
            most_unrecorded = max(most_unrecorded, started - store.recorded)
            await asyncio.sleep(0)
            running -= 1

        async with app:
            await app.timers.schedule_many(
                [TimerRequest("job", {"n": n}, delay=0) for n in range(200)]
            )
            store.hold.set()
            store.released.clear()
            worker = app.worker()
            task = asyncio.create_task(worker.run())
            try:
                await wait_for(lambda: started >= CONCURRENCY + BATCH, "the unwritten limit")
                # Every handler started has ended and its outcome waits: no slot is free, and
                # none comes free before a write, so nothing more can start.
                slots = worker.slots
                await wait_for(
                    lambda: slots.in_flight == 0 and slots.unwritten >= CONCURRENCY + BATCH,
                    "every started outcome waiting for its write",
                )
                assert slots.free() <= 0, slots.free()
                assert started == CONCURRENCY + BATCH, started
                store.released.set()
                await wait_for(lambda: store.recorded == 200, "every outcome recorded")
            finally:
                store.released.set()
                worker.stop()
                await task
            assert most_running <= CONCURRENCY
            assert most_unrecorded <= CONCURRENCY + BATCH
            counts = {status: n for status, n in (await app.timers.counts()).items() if n}
            assert counts == {Status.DONE: 200}

    asyncio.run(main())


def test_timers_claimed_ahead_of_a_slot_are_given_back_unstarted_at_shutdown(
    tmp_path: Path,
) -> None:
    """With quick handlers a worker claims beyond its free slots (the rows wait in memory under
    its lease, and count as in flight); stopped, it gives those back as they were — scheduled,
    no attempt used — and they are delivered later, once each."""

    async def main() -> None:
        url = f"sqlite:///{tmp_path / 'ahead.db'}"
        app = AsyncApp(url, concurrency=2, batch_size=50, shutdown_grace=0.05)
        gate = asyncio.Event()
        delivered: list[str] = []

        @app.handler("job")
        async def job(event: Event) -> None:
            if len(delivered) >= 300:
                await gate.wait()
            delivered.append(event.key)

        async with app:
            await app.timers.schedule_many(
                [TimerRequest("job", {"n": n}, delay=0, key=f"k{n}") for n in range(600)]
            )
            worker = app.worker()
            task = asyncio.create_task(worker.run())
            try:
                await wait_for(
                    lambda: worker.in_flight > 2 and len(delivered) >= 300, "a claim ahead"
                )
            finally:
                worker.stop()
                await task
                gate.set()
            pending = [
                t for t in (await app.timers.history(limit=1000)).items if t.status != Status.DONE
            ]
            assert pending, "everything finished before the stop: nothing to check"
            assert all(t.status in (Status.SCHEDULED, Status.RETRYING) for t in pending)
            unstarted = [t for t in pending if t.attempts == 0]
            assert unstarted, "no timer was waiting for a slot at the stop"
            for timer in unstarted:
                assert timer.key not in delivered
                assert await app.timers.attempts(timer.key) == []
            again = app.worker()
            second = asyncio.create_task(again.run())
            await wait_for(lambda: len(delivered) == 600, "the rest delivered")
            again.stop()
            await second
            assert sorted(delivered) == sorted(f"k{n}" for n in range(600))

    asyncio.run(main())
