"""``tick``: fire what is due once and exit, leaving nothing half-recorded."""

from __future__ import annotations

import asyncio

import pytest
from tests.waiting import until

from duetime import AsyncApp, Dead, Event, FrozenClock, Status
from duetime.services.materializer import Materializer


def test_tick_records_every_outcome_before_returning(db_url: str, clock: FrozenClock) -> None:
    async def main() -> None:
        app, ran = ping_app(db_url, clock)

        @app.handler("doomed")
        def doomed(event: Event) -> None:
            raise Dead("no such customer")

        async with app:
            await app.schedule("ping", delay=0, key="now")
            await app.schedule("doomed", delay=0, key="bad")
            await app.schedule("ping", delay=60, key="later")
            stats = await app.tick()
            assert stats.outcomes == {"done": 1, "dead": 1}
            assert ran == ["now"]
            assert (await app.get("now")).status is Status.DONE
            dead = await app.get("bad")
            assert dead.status is Status.DEAD
            assert dead.last_error == "no such customer"
            assert (await app.get("later")).status is Status.SCHEDULED
            clock.advance(61)
            stats = await app.tick()
            assert stats.outcomes == {"done": 1}
            assert (await app.get("later")).status is Status.DONE

    asyncio.run(main())


def ping_app(db_url: str, clock: FrozenClock) -> tuple[AsyncApp, list[str]]:
    """An app whose ``ping`` handler records the keys it ran, in order."""
    app = AsyncApp(db_url, clock=clock)
    ran: list[str] = []

    @app.handler("ping")
    async def ping(event: Event) -> None:
        ran.append(event.key)

    return app, ran


def listener_counts(app: AsyncApp, clock: FrozenClock) -> tuple[int, int]:
    """(clock, store) wake-up listeners: each running worker and materializer holds one of each."""
    return len(clock._listeners), len(app.store._db.listeners)  # type: ignore[attr-defined]


def test_repeated_ticks_leave_no_wakeup_listeners_behind(db_url: str, clock: FrozenClock) -> None:
    async def main() -> None:
        app, ran = ping_app(db_url, clock)

        async with app:
            await app.schedules.add("hourly", "ping", every="PT1H")
            before = listener_counts(app, clock)
            for _ in range(5):
                await app.tick()
                clock.advance(3600)
            assert ran  # the ticks did work: the schedule's timers fired
            assert listener_counts(app, clock) == before

    asyncio.run(main())


def test_a_running_worker_hears_the_clock_and_forgets_it_when_stopped(
    db_url: str, clock: FrozenClock
) -> None:
    async def main() -> None:
        app, ran = ping_app(db_url, clock)

        async with app:
            await app.schedule("ping", delay=3600, key="later")
            clock_before, store_before = listener_counts(app, clock)
            worker = app.worker()
            task = asyncio.create_task(worker.run())
            listening = (clock_before + 2, store_before + 2)
            await until(  # started: the worker and its materializer are listening
                lambda: listener_counts(app, clock) == listening, 60, "the listeners", every=0.01
            )
            clock.advance(3600)  # the worker sleeps up to `recheck`: only the clock wakes it
            await until(lambda: bool(ran), 60, "the timer to run", every=0.01)
            assert ran == ["later"]
            worker.stop()
            await asyncio.wait_for(task, 10)
            assert listener_counts(app, clock) == (clock_before, store_before)

    asyncio.run(main())


def test_a_tick_that_fails_leaves_no_node_or_listener_behind(
    db_url: str, clock: FrozenClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Materializing schedules is part of the tick: when it raises, the tick raises, and the
    node it registered is gone again rather than listed until it goes stale."""

    async def fail(self: Materializer) -> int:
        raise RuntimeError("schedules unreadable")

    async def main() -> None:
        app, _ = ping_app(db_url, clock)

        async with app:
            before = listener_counts(app, clock)
            monkeypatch.setattr(Materializer, "run_once", fail)
            with pytest.raises(RuntimeError, match="schedules unreadable"):
                await app.tick()
            assert await app.store.list_nodes() == []
            assert listener_counts(app, clock) == before

    asyncio.run(main())
