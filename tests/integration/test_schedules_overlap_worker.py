"""A real worker (its producer, executor, completer and materialiser) on a pinned clock: a
handler of each schedule's type blocks past the next occurrences, and ``allow``, ``skip`` and
``buffer_one`` each do what they say; the catch-up grace decides between late and missed.

The clock moves only when the test sets it (workers wake on the jump); handlers block on
events the test sets, so nothing depends on how fast the machine is.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from tests.waiting import run
from tests.waiting import until as wait

from duetime import AsyncApp, Event, FrozenClock, Status
from duetime.model import Timer
from duetime.schedules import occurrence_key
from duetime.timemath.recurrence.overlap import SKIPPED_BUFFER_FULL, SKIPPED_RUNNING

# The PostgreSQL probe lives beside the store tests; pytest does not put it on sys.path.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from storekit import pooled_pg_url

START = datetime(2025, 3, 8, 12, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
POLICIES = ("allow", "skip", "buffer_one")


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'overlap.db'}"
        return
    with pooled_pg_url() as found:
        yield found


async def until(check: Callable[[], Awaitable[bool]], what: str, within: float = 60) -> None:
    """Poll ``check`` until it holds; fail naming ``what`` (no assertion on how long)."""
    await wait(check, within, what)


class Blocking:
    """A handler that records each start and blocks until the test lets that key finish."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.gates: dict[str, asyncio.Event] = {}

    def gate(self, key: str) -> asyncio.Event:
        return self.gates.setdefault(key, asyncio.Event())

    def release_all(self) -> None:
        for key in self.started:
            self.gate(key).set()

    async def run(self, event: Event) -> None:
        self.started.append(event.key)
        await self.gate(event.key).wait()


def key(policy: str, minute: int) -> str:
    return occurrence_key(policy, START + minute * MINUTE)


def test_a_handler_blocking_past_the_next_occurrences(url: str) -> None:
    clock = FrozenClock(START)
    handler = Blocking()

    async def main() -> None:
        app = AsyncApp(url, "ns", clock=clock, lease=3600, heartbeat=60)
        for policy in POLICIES:
            app.handler(f"job.{policy}")(handler.run)
        async with app:
            for policy in POLICIES:
                await app.schedules.add(policy, f"job.{policy}", cron="* * * * *", overlap=policy)
            worker = app.worker()
            running = asyncio.create_task(worker.run())

            async def timer(name: str) -> Timer | None:
                return await app.store.get_timer("ns", name)

            async def started(*keys: str) -> bool:
                return all(k in handler.started for k in keys)

            async def made(*keys: str) -> bool:
                return None not in [await timer(k) for k in keys]

            try:
                clock.set(START + MINUTE)
                await until(
                    lambda: started(*(key(p, 1) for p in POLICIES)), "the first occurrences"
                )
                clock.set(START + 2 * MINUTE)  # every first one still runs
                await until(lambda: started(key("allow", 2)), "allow's second occurrence")
                await until(
                    lambda: made(key("skip", 2), key("buffer_one", 2)), "the others' second"
                )
                clock.set(START + 3 * MINUTE)
                await until(lambda: started(key("allow", 3)), "allow's third occurrence")
                await until(lambda: made(key("skip", 3), key("buffer_one", 3)), "the others' third")
                assert key("buffer_one", 2) not in handler.started  # buffered, waiting

                handler.gate(key("buffer_one", 1)).set()
                await until(lambda: started(key("buffer_one", 2)), "the buffered one, released")
                handler.release_all()

                async def settled() -> bool:
                    timers = [await timer(key(p, m)) for p in POLICIES for m in (1, 2, 3)]
                    return all(t is not None and t.status.is_final for t in timers)

                await until(settled, "every occurrence to end")

            finally:
                handler.release_all()
                worker.stop()
                await running

            fired = sorted(k for k in handler.started)
            assert fired == sorted(
                [key("allow", m) for m in (1, 2, 3)]
                + [key("skip", 1), key("buffer_one", 1), key("buffer_one", 2)]
            )
            for name, reason in (
                (key("skip", 2), SKIPPED_RUNNING),
                (key("skip", 3), SKIPPED_RUNNING),
                (key("buffer_one", 3), SKIPPED_BUFFER_FULL),
            ):
                skipped = await timer(name)
                assert skipped is not None
                assert (skipped.status, skipped.attempts, skipped.last_error) == (
                    Status.CANCELLED,
                    0,
                    reason,
                )
            first, second = await timer(key("buffer_one", 1)), await timer(key("buffer_one", 2))
            assert first is not None
            assert second is not None
            assert first.status is Status.DONE
            assert second.status is Status.DONE
            assert first.completed_at is not None
            assert second.fired_at is not None
            assert second.fired_at >= first.completed_at  # it waited for the first to end

    run(main)


def test_the_catch_up_grace_tells_late_from_missed(url: str) -> None:
    clock = FrozenClock(START)
    ran: list[str] = []

    async def main() -> None:
        app = AsyncApp(url, "ns", clock=clock)

        @app.handler("job")
        async def record(event: Event) -> None:
            ran.append(event.key)

        async with app:
            # Everything is down from 12:00 to 12:04:30: the 12:01 .. 12:04 occurrences are
            # late by 3.5 minutes at most; "wide"'s grace covers that, "narrow"'s does not.
            await app.schedules.add(
                "wide", "job", cron="* * * * *", catch_up="none", catch_up_grace="PT5M"
            )
            await app.schedules.add(
                "narrow", "job", cron="* * * * *", catch_up="latest", catch_up_grace=120
            )
            clock.set(START + 4 * MINUTE + timedelta(seconds=30))
            worker = app.worker()
            running = asyncio.create_task(worker.run())
            wanted = [key("wide", m) for m in (1, 2, 3, 4)] + [key("narrow", 4)]

            async def fired() -> bool:
                return all(k in ran for k in wanted)

            await until(fired, "the late occurrences")
            clock.set(START + 5 * MINUTE)

            async def next_ones() -> bool:
                return key("wide", 5) in ran and key("narrow", 5) in ran

            await until(next_ones, "the next occurrences")
            worker.stop()
            await running
            assert sorted(ran) == sorted([*wanted, key("wide", 5), key("narrow", 5)])

    run(main)
