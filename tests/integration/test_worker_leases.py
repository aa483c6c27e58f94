"""A worker's heartbeats keep the leases of the attempts it runs, claim tokens and all: a
handler that runs for several lease lengths is neither rescued nor run twice, on SQLite and
PostgreSQL."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.waiting import run, until

from duetime import AsyncApp, Event, Outcome, Status

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from storekit import pooled_pg_url


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'leases.db'}"
        return
    with pooled_pg_url() as found:
        yield found


def test_heartbeats_keep_a_long_attempt_under_its_own_claim(url: str) -> None:
    async def main() -> None:
        app = AsyncApp(url, lease=1.0, heartbeat=0.2, rescue_interval=0.2)
        ran: list[int] = []
        done = asyncio.Event()

        @app.handler("slow")
        async def slow(event: Event) -> None:
            ran.append(event.attempt)
            await asyncio.sleep(3.0)  # three lease lengths
            done.set()

        async with app:
            await app.schedule("slow", {}, delay=0, key="k", max_attempts=3)
            worker = asyncio.create_task(app.run_worker())
            try:
                await asyncio.wait_for(done.wait(), 30)

                async def done_() -> bool:
                    return (await app.get("k")).status is Status.DONE

                await until(done_, 60, "the timer done", every=0.05)
            finally:
                worker.cancel()
                await asyncio.gather(worker, return_exceptions=True)
            assert ran == [1]
            (attempt,) = await app.timers.attempts("k")
            assert attempt.outcome is Outcome.DONE

    run(main)
