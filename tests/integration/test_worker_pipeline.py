"""A busy worker keeps two claims and two outcome writes under way at once, on real SQLite:
each overlaps the other's waiting, and handlers still start oldest first."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from test_worker_slots import wait_for

from duetime import AsyncApp, Event, Status, TimerRequest
from duetime.model import Claimed, Finish
from duetime.store import create_store
from duetime.worker import CLAIMS_IN_FLIGHT, WRITES_IN_FLIGHT

N = 200
HOLD_LIMIT = 10.0  # seconds a held call waits for the next one before the test fails


class OverlapStore:
    """The real store, except that the answer of the ``hold``-th call of ``claim_due`` or
    ``finish`` comes back only once the next call of the same method has begun (or after
    :data:`HOLD_LIMIT`, noted as a failure); it counts the calls under way at once."""

    def __init__(self, inner: Any, *, hold_claim: int = 0, hold_finish: int = 0) -> None:
        self._inner = inner
        self.hold = {"claim_due": hold_claim, "finish": hold_finish}
        self.calls = {"claim_due": 0, "finish": 0}
        self.active = {"claim_due": 0, "finish": 0}
        self.most = {"claim_due": 0, "finish": 0}
        self.next_began = {"claim_due": asyncio.Event(), "finish": asyncio.Event()}
        self.held_timed_out: list[str] = []
        self.overlapping_batches: list[int] = []  # outcomes of each write begun beside another

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        self.calls[method] += 1
        number = self.calls[method]
        if number == self.hold[method] + 1:
            self.next_began[method].set()
        self.active[method] += 1
        self.most[method] = max(self.most[method], self.active[method])
        try:
            answer = await getattr(self._inner, method)(*args, **kwargs)
            if number == self.hold[method]:  # the answer comes back late
                try:
                    await asyncio.wait_for(self.next_began[method].wait(), HOLD_LIMIT)
                except TimeoutError:
                    self.held_timed_out.append(method)
            return answer
        finally:
            self.active[method] -= 1

    async def claim_due(self, *args: Any, **kwargs: Any) -> list[Claimed]:
        claimed: list[Claimed] = await self._call("claim_due", *args, **kwargs)
        return claimed

    async def finish(self, finishes: Sequence[Finish], node_id: str, now: datetime) -> set[int]:
        if self.active["finish"]:
            self.overlapping_batches.append(len(finishes))
        lost: set[int] = await self._call("finish", finishes, node_id, now)
        return lost


async def drain(
    store: OverlapStore,
    url: str,
    concurrency: int,
    batch: int,
    stagger: float = 0.0,
    observer: Any = None,
    **settings: Any,
) -> list[int]:
    """Schedule N timers due at distinct past instants, work until all are done; the order in
    which their handlers started (by their number, which follows the due instants)."""
    app = AsyncApp(url, store=store, concurrency=concurrency, batch_size=batch, **settings)
    if observer is not None:
        app.observers.append(observer)
    started: list[int] = []

    @app.handler("job")
    async def job(event: Event) -> None:
        started.append(event.payload["n"])
        if stagger:  # handlers end one by one, not all in one turn of the loop
            await asyncio.sleep(stagger * (event.payload["n"] % 10))

    base = datetime.now(UTC) - timedelta(hours=1)
    async with app:
        await app.timers.schedule_many(
            [TimerRequest("job", {"n": n}, at=base + timedelta(seconds=n)) for n in range(N)]
        )
        worker = app.worker()
        task = asyncio.create_task(worker.run())
        try:
            await wait_for(lambda: len(started) == N, "every handler", 20)
            await wait_for(lambda: worker.in_flight == 0 and not worker.held(), "every outcome", 20)
        finally:
            worker.stop()
            await task
        counts = {status: n for status, n in (await app.timers.counts()).items() if n}
        assert counts == {Status.DONE: N}
    return started


def held_drain(path: Path, method: str, concurrency: int, batch: int = 20) -> list[int]:
    """:func:`drain` with the answer of ``method``'s first call made while a backlog lasts held
    back until its next call begins; checks it did begin, and as many calls overlapped as a
    worker allows."""
    holds = {"finish": {"hold_finish": 1}, "claim_due": {"hold_claim": 2}}[method]
    expected = {"finish": WRITES_IN_FLIGHT, "claim_due": CLAIMS_IN_FLIGHT}[method]

    async def main() -> list[int]:
        url = f"sqlite:///{path}"
        store = OverlapStore(create_store(url), **holds)
        started = await drain(store, url, concurrency=concurrency, batch=batch)
        assert store.held_timed_out == []
        assert store.most[method] == expected == 2
        return started

    return asyncio.run(main())


def test_a_second_outcome_write_starts_while_the_first_is_under_way(tmp_path: Path) -> None:
    """The first write waits for a second one to begin: with one write at a time it would wait
    in vain (and the test fails); every outcome is recorded, once."""
    started = held_drain(tmp_path / "writes.db", "finish", concurrency=10)
    assert sorted(started) == list(range(N))


def test_a_second_outcome_write_waits_for_half_a_batch(tmp_path: Path) -> None:
    """Beside a write under way, a second one starts only with half a batch_size of outcomes
    to write, not with each outcome as it comes (which costs the server more per outcome)."""
    url = f"sqlite:///{tmp_path / 'halves.db'}"

    async def main() -> OverlapStore:
        store = OverlapStore(create_store(url), hold_finish=1)
        started = await drain(store, url, concurrency=40, batch=40, stagger=0.002)
        assert sorted(started) == list(range(N))
        return store

    store = asyncio.run(main())
    assert store.overlapping_batches, "no write ever began beside another"
    assert min(store.overlapping_batches) >= 20, store.overlapping_batches


def test_claims_overlap_with_a_backlog_and_handlers_still_start_oldest_first(
    tmp_path: Path,
) -> None:
    """The second claim's answer (the first claim made while the backlog lasts) comes back only
    once a third claim has begun, and the third may answer first: its newer rows wait for the
    second's, so handlers start in due order all the same."""
    started = held_drain(tmp_path / "claims.db", "claim_due", concurrency=200)
    assert started == list(range(N))


def test_claims_never_overlap_without_a_backlog(tmp_path: Path) -> None:
    """A claim that comes back short (nothing more due) is followed by a sleep, not by a second
    claim under way: one claim at a time when the batch is larger than what is due."""

    async def main() -> None:
        url = f"sqlite:///{tmp_path / 'quiet.db'}"
        store = OverlapStore(create_store(url))
        started = await drain(store, url, concurrency=500, batch=500)
        assert store.most["claim_due"] == 1
        assert started == list(range(N))

    asyncio.run(main())


class FailsOnce:
    """A worker observer whose ``claimed`` hook raises once, on its ``failing``-th call."""

    def __init__(self, failing: int) -> None:
        self.calls = 0
        self.failing = failing

    def claimed(self, namespace: str, count: int, seconds: float) -> None:
        self.calls += 1
        if self.calls == self.failing:
            raise RuntimeError("observer broke")

    def started(self, timer: Any, attempt: int, lateness: timedelta) -> None:
        pass

    def finished(self, timer: Any, outcome: Any) -> None:
        pass

    def held_back(self, namespace: str, pattern: str) -> None:
        pass


def test_a_pipelined_claim_that_fails_to_start_its_rows_is_logged_and_retried(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Starting the rows of a pipelined claim (the second claim, made while the backlog lasts)
    fails: the error is logged as any failed claim is, the worker goes on, and once their lease
    runs out those rows are rescued and run; every timer ends done."""
    url = f"sqlite:///{tmp_path / 'broken.db'}"

    async def main() -> None:
        store = OverlapStore(create_store(url))
        started = await drain(
            store,
            url,
            concurrency=200,
            batch=20,
            observer=FailsOnce(failing=2),
            lease=timedelta(seconds=1),
            heartbeat=timedelta(seconds=0.2),
            rescue_interval=timedelta(seconds=0.2),
        )
        assert sorted(started) == list(range(N))  # each once: the failed claim started none
        assert store.calls["claim_due"] >= 3

    with caplog.at_level(logging.ERROR, logger="duetime"):
        asyncio.run(main())
    failures = [r for r in caplog.records if "claiming due timers failed" in r.getMessage()]
    assert len(failures) == 1
    assert failures[0].exc_info is not None
    assert "observer broke" in str(failures[0].exc_info[1])
