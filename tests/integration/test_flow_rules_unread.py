"""A worker that could not read its namespace's flow control rules yet claims nothing: claiming
as if there were none would start what a pause holds and take past a limit. Once it has read
them, a failed re-read keeps the last ones."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from test_worker_slots import wait_for

from duetime import AsyncApp, Event, Status
from duetime.model.flow_rules import FlowRule


def run_paused(
    tmp_path: Path, fails: Callable[[int], bool], reads_wanted: int, what: str
) -> tuple[list[str], Status, int]:
    """A worker over one overdue timer of a paused type, its ``n``-th read of the rules for a
    claim (from 1) failing when ``fails(n)``; run until ``reads_wanted`` such reads were made.
    Returns the keys started, the timer's status and the number of reads."""

    async def main() -> tuple[list[str], Status, int]:
        app = AsyncApp(f"sqlite:///{tmp_path / 'rules.db'}")
        started: list[str] = []

        @app.handler("report")
        async def report(event: Event) -> None:
            started.append(event.key)

        async with app:
            await app.limits.pause("report")
            await app.schedule("report", None, key="r1", at=datetime.now(UTC) - timedelta(1))
            limits = app.store.limits
            read = limits.list_rules
            reads: list[int] = []  # one per read of the rules for a claim

            async def failing(namespace: str, *, claiming: bool = False) -> list[FlowRule]:
                if claiming:
                    reads.append(len(reads))
                    if fails(len(reads)):
                        raise ConnectionError("the store is unavailable")
                return await read(namespace, claiming=claiming)

            limits.list_rules = failing  # type: ignore[method-assign]
            worker = app.worker()
            task = asyncio.create_task(worker.run())
            try:
                await wait_for(lambda: len(reads) >= reads_wanted or started, what, 20)
            finally:
                worker.stop()
                await task
            timer = await app.get("r1")
            return started, timer.status, len(reads)

    return asyncio.run(main())


def test_a_worker_claims_nothing_until_it_has_read_the_rules(tmp_path: Path) -> None:
    # The failed read, then the next claim's read (after the failure pause): any claim made
    # without the rules came before it.
    started, status, reads = run_paused(tmp_path, lambda n: n == 1, 2, "the rules read again")
    assert reads >= 2
    assert started == []
    assert status is Status.SCHEDULED


def test_a_failed_re_read_keeps_the_last_rules(tmp_path: Path) -> None:
    started, status, reads = run_paused(tmp_path, lambda n: n > 1, 3, "two failed re-reads")
    assert reads >= 3
    assert started == []
    assert status is Status.SCHEDULED
