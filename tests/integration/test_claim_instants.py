"""An attempt is claimed before it starts, and starts before it ends: a worker on a real clock
claims rows a little ahead of their instants (taking every row due within its look-ahead after
the first) and holds them until then, and each attempt still reads ``claimed_at <= started_at
<= finished_at``, with no rule and under a limit's claim, on SQLite and PostgreSQL. A claim
that recorded the horizon it claimed up to read as claimed after the start."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from test_claim_window import Claims
from test_worker_slots import wait_for

from duetime import AsyncApp, Event, Outcome, TimerRequest
from duetime.model import Attempt

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))
from storekit import pooled_pg_url

N = 12
SPACING = timedelta(milliseconds=3)
LEAD = timedelta(milliseconds=300)
"""From the worker asleep to the first instant: time to store the rows first."""


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'instants.db'}"
        return
    with pooled_pg_url() as found:
        yield found


def attempts_of_a_stream(url: str, limited: bool) -> list[Attempt]:
    """Every attempt of ``N`` timers due ``SPACING`` apart, run by the app's own worker."""
    found: list[Attempt] = []

    async def main() -> None:
        claims = Claims()
        app = AsyncApp(url, concurrency=50)
        app.observers.append(claims)
        started: list[int] = []

        @app.handler("tick")
        async def tick(event: Event) -> None:
            started.append(event.payload["n"])

        async with app:
            if limited:
                await app.limits.set("tick", concurrency=1000)
            worker = app.worker()
            task = asyncio.create_task(worker.run())
            try:
                await asyncio.wait_for(claims.asleep.wait(), 20)
                first = datetime.now(UTC) + LEAD
                requests = [
                    TimerRequest("tick", {"n": n}, at=first + n * SPACING, key=f"k{n}")
                    for n in range(N)
                ]
                await app.timers.schedule_many(requests)
                await wait_for(lambda: len(started) == N, "every handler", 20)
            finally:
                worker.stop()
                await task
            for n in range(N):
                found.extend(await app.timers.attempts(f"k{n}"))

    asyncio.run(main())
    return found


@pytest.mark.parametrize("limited", [False, True], ids=["no-rule", "limit"])
def test_every_attempt_is_claimed_before_it_starts(url: str, limited: bool) -> None:
    attempts = attempts_of_a_stream(url, limited)
    assert len(attempts) == N
    out_of_order = [
        (a.timer_id, a.claimed_at, a.started_at, a.finished_at)
        for a in attempts
        if a.claimed_at is None
        or a.started_at is None
        or a.finished_at is None
        or not a.claimed_at <= a.started_at <= a.finished_at
    ]
    assert out_of_order == []
    assert all(a.outcome is Outcome.DONE for a in attempts)
