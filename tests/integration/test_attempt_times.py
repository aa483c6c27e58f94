"""Recorded times are true: an attempt's start is when its handler began, not when its row was
claimed, and the timer's fired_at is its first attempt's start. On SQLite and PostgreSQL,
through one ``tick``; the clock moves between the claim and the start (as it does while a row
claimed ahead waits for its instant)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from tests.waiting import run

from duetime import AsyncApp, Event, FrozenClock, Outcome, Status, Timer
from duetime.worker.observing import WorkerObserver

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from storekit import pooled_pg_url

START = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
WAIT = timedelta(seconds=2)
"""From the claim to the handler's start."""
RUN = timedelta(seconds=3)
"""The handler's own time."""


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'times.db'}"
        return
    with pooled_pg_url() as found:
        yield found


class WaitAfterClaim:
    """Moves the clock on once a claim is back, before any handler starts."""

    def __init__(self, clock: FrozenClock) -> None:
        self.clock = clock

    def claimed(self, namespace: str, count: int, seconds: float) -> None:
        self.clock.advance(WAIT)

    def started(self, timer: Timer, attempt: int, lateness: timedelta) -> None:
        pass

    def finished(self, timer: Timer, outcome: Outcome) -> None:
        pass


def test_started_at_and_fired_at_are_when_the_handler_began(url: str) -> None:
    async def main() -> None:
        clock = FrozenClock(START)
        app = AsyncApp(url, clock=clock)
        app.observers.append(WaitAfterClaim(clock))
        seen: list[datetime | None] = []

        @app.handler("job")
        async def job(event: Event) -> None:
            seen.append(clock.now())
            clock.advance(RUN)

        async with app:
            await app.schedule("job", {}, at=START, key="k")
            await app.tick()
            timer = await app.get("k")
            assert timer.status is Status.DONE
            began = START + WAIT
            assert seen == [began]
            assert timer.fired_at == began
            (attempt,) = await app.timers.attempts("k")
            assert attempt.started_at == began
            assert attempt.finished_at == began + RUN

    run(main)


def test_a_running_attempt_shows_its_claim_and_no_start_and_the_handler_sees_its_start(
    url: str,
) -> None:
    """While the handler runs, the store knows when the row was claimed, not yet when the
    handler began (its outcome reports that): the attempt shows claimed_at and no started_at,
    the timer no fired_at. The handler's event says when it truly fired; a second attempt's
    event keeps the first one's start."""

    async def main() -> None:
        clock = FrozenClock(START)
        app = AsyncApp(url, clock=clock)
        app.observers.append(WaitAfterClaim(clock))
        fired: list[datetime | None] = []
        during: list[tuple[datetime | None, datetime | None, datetime | None]] = []

        @app.handler("job")
        async def job(event: Event) -> None:
            fired.append(event.fired_at)
            if event.attempt == 1:
                (attempt,) = await app.timers.attempts("k")
                timer = await app.get("k")
                during.append((attempt.claimed_at, attempt.started_at, timer.fired_at))
                clock.advance(RUN)
                raise RuntimeError("again")

        async with app:
            await app.schedule("job", {}, at=START, key="k", max_attempts=3)
            await app.tick()
            assert during == [(START, None, None)]
            first_start = START + WAIT
            timer = await app.get("k")
            assert (timer.status, timer.fired_at) == (Status.RETRYING, first_start)
            clock.set(timer.run_at)
            await app.tick()
            assert fired == [first_start, first_start]
            timer = await app.get("k")
            assert (timer.status, timer.fired_at) == (Status.DONE, first_start)
            first, second = await app.timers.attempts("k")
            assert (first.claimed_at, first.started_at) == (START, first_start)
            assert second.started_at == timer.run_at + WAIT
            assert second.claimed_at == timer.run_at

    run(main)


def test_the_handler_sees_its_true_start_as_fired_at(url: str) -> None:
    """The claim is made ahead of the start (here the clock moves WAIT between them): the
    first attempt's event says the handler's start, not the claim's instant; a later attempt's
    says the first attempt's start."""

    async def main() -> None:
        clock = FrozenClock(START)
        app = AsyncApp(url, clock=clock)
        app.observers.append(WaitAfterClaim(clock))
        fired: list[datetime | None] = []

        @app.handler("job")
        async def job(event: Event) -> None:
            fired.append(event.fired_at)
            if event.attempt == 1:
                raise RuntimeError("again")

        async with app:
            await app.schedule("job", {}, at=START, key="k", max_attempts=2)
            await app.tick()
            timer = await app.get("k")
            clock.set(timer.run_at)
            await app.tick()
            assert fired == [START + WAIT, START + WAIT]
            assert (await app.get("k")).status is Status.DONE

    run(main)


class TickingClock(FrozenClock):
    """A clock a millisecond later at every reading: any two readings differ."""

    def now(self) -> datetime:
        instant = super().now()
        self.advance(timedelta(milliseconds=1))
        return instant


class HeardLateness(WorkerObserver):
    def __init__(self) -> None:
        self.lateness: dict[str, timedelta] = {}

    def started(self, timer: Timer, attempt: int, lateness: timedelta) -> None:
        self.lateness[timer.key] = lateness


def test_the_lateness_observers_hear_is_the_recorded_starts(url: str) -> None:
    """The lateness metrics are told is measured from the attempt's recorded start, for each
    kind of handler: a plain one begins in its thread after it was handed there, a
    transactional one in its own task; the clock here moves at every reading, so an instant
    read anywhere else would differ."""

    async def main() -> None:
        app = AsyncApp(url, clock=TickingClock(START))
        heard = HeardLateness()
        app.observers.append(heard)

        @app.handler("plain")
        def plain(event: Event) -> None:
            return None

        @app.handler("eager")
        async def eager(event: Event) -> None:
            return None

        if url.startswith("sqlite:"):  # SQLite's connection is a plain one: so is its handler

            @app.handler("in.transaction", transactional=True)
            def in_sqlite_transaction(event: Event, connection: object) -> None:
                return None

        else:

            @app.handler("in.transaction", transactional=True)
            async def in_transaction(event: Event, connection: object) -> None:
                return None

        async with app:
            for type in ("plain", "eager", "in.transaction"):
                await app.schedule(type, {}, at=START, key=type)
            await app.tick()
            for key in ("plain", "eager", "in.transaction"):
                timer = await app.get(key)
                assert timer.status is Status.DONE, key
                (attempt,) = await app.timers.attempts(key)
                assert attempt.started_at is not None
                assert heard.lateness[key] == attempt.started_at - timer.due_at, key

    run(main)
