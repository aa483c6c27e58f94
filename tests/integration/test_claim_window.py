"""Timers due a few milliseconds apart (a stream of requests, each due soon after it came) are
claimed a window at a time — every row due within the claim-ahead after the first — and each
handler still starts at its own due instant, never before it: with no rule, and under a rule
that never binds (a limit's claim one due instant at a time fell behind the stream as soon as
its transaction and the read of the next due took longer than the gap between instants). A
rate never has a row claimed, nor held, longer than its pacing before the row starts."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from test_worker_slots import wait_for

from duetime import AsyncApp, Event, TimerRequest
from duetime.model import Claimed, Outcome, Timer
from duetime.model.flow_rules import RuledClaim
from duetime.worker import Worker
from duetime.worker.flow import RATE_START_DELAY

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))
from storekit import pooled_pg_url

N = 40
MS = timedelta(milliseconds=1)
SPACING = 3 * MS
LEAD = 300 * MS
"""From the worker asleep to the first instant: storing ``N`` rows in one transaction takes
tens of milliseconds, a few times that on a loaded machine."""
RULES: dict[str, dict[str, Any]] = {
    "none": {},
    "concurrency": {"concurrency": 100_000},
    "rate": {"concurrency": 100_000, "rate": "1000000/s"},
}


class Claims:
    """A worker observer that records the size of every claim, and when the worker first
    went to sleep with nothing to claim."""

    def __init__(self) -> None:
        self.sizes: list[int] = []
        self.asleep = asyncio.Event()

    def claimed(self, namespace: str, count: int, seconds: float) -> None:
        if count:
            self.sizes.append(count)

    def started(self, timer: Timer, attempt: int, lateness: timedelta) -> None:
        pass

    def finished(self, timer: Timer, outcome: Outcome) -> None:
        pass

    def held_back(self, namespace: str, pattern: str) -> None:
        pass

    def idle(self, namespace: str, next_due: datetime | None) -> None:
        self.asleep.set()


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'window.db'}"
        return
    with pooled_pg_url() as found:
        yield found


@dataclass
class Stream:
    """What a worker did with ``N`` timers due ``spacing`` apart: the size of each claim, how
    early any handler started, and how far past its sending each claimed row was due."""

    sizes: list[int] = field(default_factory=list)
    early: list[timedelta] = field(default_factory=list)
    reach: list[timedelta] = field(default_factory=list)


def stream(
    url: str, rule: dict[str, Any], spacing: timedelta, ahead: timedelta | None = None
) -> Stream:
    """Run a worker (``ahead``: its claim-ahead; None: the app's default worker) over ``N``
    timers due ``spacing`` apart, stored while it sleeps."""
    seen = Stream()

    async def main() -> None:
        claims = Claims()
        app = AsyncApp(url, concurrency=100)
        app.observers.append(claims)
        started: list[int] = []

        @app.handler("tick")
        async def tick(event: Event) -> None:
            now = datetime.now(UTC)
            started.append(event.payload["n"])
            if now < event.due_at:
                seen.early.append(event.due_at - now)

        async with app:
            if rule:
                await app.limits.set("tick", **rule)
                limits = app.store.limits
                assert limits is not None
                claim = limits.claim

                async def recorded(*args: Any, **kwargs: Any) -> RuledClaim:
                    sent = datetime.now(UTC)
                    ruled = await claim(*args, **kwargs)
                    rows: list[Claimed] = ruled.claimed
                    seen.reach.extend(row.timer.run_at - sent for row in rows)
                    return ruled

                limits.claim = recorded  # type: ignore[method-assign]
            if ahead is None:
                worker = app.worker()
            else:
                args = (app.store, app.registry, app.settings, app.clock)
                worker = Worker(*args, observers=[claims], claim_ahead=ahead)
            task = asyncio.create_task(worker.run())
            # Stored once the worker sleeps with nothing to claim, the first due LEAD later:
            # time to store the rows, so that the worker meets the stream as it comes due
            # rather than a backlog (which one claim would take whole).
            await asyncio.wait_for(claims.asleep.wait(), 20)
            first = datetime.now(UTC) + max(LEAD, 3 * (ahead or spacing))
            await app.timers.schedule_many(
                [TimerRequest("tick", {"n": n}, at=first + n * spacing) for n in range(N)]
            )
            try:
                await wait_for(lambda: len(started) == N, "every handler", 20)
            finally:
                worker.stop()
                await task
        assert sorted(started) == list(range(N))
        seen.sizes = claims.sizes

    asyncio.run(main())
    assert seen.early == [], f"handlers started before their due instants: {seen.early}"
    assert sum(seen.sizes) == N
    return seen


@pytest.mark.parametrize("rule", list(RULES))
def test_rows_due_within_the_claim_ahead_share_a_claim_and_start_on_time(
    url: str, rule: str
) -> None:
    sizes = stream(url, RULES[rule], SPACING).sizes
    # One claim an instant would be 40; a window of 25 ms over 3 ms steps takes about 9 rows.
    assert len(sizes) <= N // 2, f"claims of {sizes}: not a window at a time"


@pytest.mark.parametrize("rule", list(RULES))
def test_instants_further_apart_than_a_claim_takes_still_share_one(url: str, rule: str) -> None:
    """Instants 10 ms apart, a claim-ahead of 80 ms (50 ms under a rate, see the next test):
    a claim an instant, each made before its instant, would be 40 claims of one row; a claim
    a window takes the 10 to 16 rows due within the claim-ahead either side of its first."""
    sizes = stream(url, RULES[rule], 10 * MS, ahead=80 * MS).sizes
    assert len(sizes) <= N // 4, f"claims of {sizes}: not a window at a time"


def test_a_rate_claims_no_row_due_past_its_pacing(url: str) -> None:
    """A rate's bound holds for starts within the pacing after their grant: with a claim-ahead
    far longer than that, every row a claim under the rate brings is still due within the
    pacing of the claim's sending (and starts at its instant, never before it)."""
    seen = stream(url, RULES["rate"], SPACING, ahead=4 * RATE_START_DELAY)
    assert len(seen.reach) == N
    assert max(seen.reach) <= RATE_START_DELAY, max(seen.reach)
