"""An async handler begins only while its lease is good, judged as it begins: on SQLite and
PostgreSQL, whether or not the event loop starts a task's first step at once.

A task's first step runs when the loop comes to it (always on Python 3.11, and on any loop with
a task factory of its own), after the other tasks ready before it. A step that takes long
(a handler computing before its first ``await``, a process paused or starved of CPU) then
delays every handler started with it: one whose lease ran out meanwhile must not begin, since
another node may have rescued and started it. A frozen clock moved by the first handler stands
for that long step, with no sleeping.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from tests.waiting import run

from duetime import AsyncApp, Event, FrozenClock, Status, TimerRequest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from storekit import pooled_pg_url

LEASE = timedelta(seconds=10)
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'lease.db'}"
        return
    with pooled_pg_url() as found:
        yield found


def plain_tasks(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
    """A task factory: with one set, no Python starts a task's first step at once."""
    return asyncio.Task(coro, loop=loop, **kwargs)


@pytest.mark.parametrize("factory", [None, plain_tasks], ids=["default-loop", "task-factory"])
def test_an_async_handler_whose_lease_ran_out_before_its_first_step_does_not_begin(
    url: str, factory: Any
) -> None:
    clock = FrozenClock(T0)
    began: list[str] = []

    async def main() -> None:
        asyncio.get_running_loop().set_task_factory(factory)
        app = AsyncApp(
            url, "ns", clock=clock, lease=LEASE.total_seconds(), heartbeat=2, concurrency=10
        )

        @app.handler("job")
        async def job(event: Event) -> None:
            began.append(event.key)
            if event.key == "a-slow":
                # Its first step outlasts the lease of every row claimed with it.
                clock.advance(LEASE)

        async with app:
            await app.timers.schedule_many(
                [
                    TimerRequest("job", None, at=T0 - timedelta(seconds=2), key="a-slow"),
                    TimerRequest("job", None, at=T0 - timedelta(seconds=1), key="b-next"),
                ]
            )
            stats = await app.tick()
            slow, following = await app.get("a-slow"), await app.get("b-next")
        assert began == ["a-slow"], "a handler began after its lease had run out"
        assert stats.outcomes["done"] == 1
        assert slow.status is Status.DONE
        assert following.status is Status.SCHEDULED  # given back unstarted, for any node to run
        assert following.attempts == 0

    run(main)
