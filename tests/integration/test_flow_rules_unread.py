"""A worker that could not read its namespace's flow control rules yet claims nothing: claiming
as if there were none would start what a pause holds and take past a limit. Once it has read
them, a failed re-read keeps the last ones."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

from test_worker_slots import wait_for

from duetime import AsyncApp, Event, Status
from duetime.model.limits import FlowRule


def test_a_worker_claims_nothing_until_it_has_read_the_rules(tmp_path: Path) -> None:
    async def main() -> tuple[list[str], Status, int]:
        app = AsyncApp(f"sqlite:///{tmp_path / 'unread.db'}")
        started: list[str] = []

        @app.handler("report")
        async def report(event: Event) -> None:
            started.append(event.key)

        async with app:
            await app.pause("report")
            await app.schedule("report", None, key="r1", at=datetime.now(UTC) - timedelta(1))
            limits = app.store.limits
            read = limits.list_rules
            reads: list[int] = []  # one per read of the rules for a claim

            async def failing_first(namespace: str, *, claiming: bool = False) -> list[FlowRule]:
                if claiming:
                    reads.append(len(reads))
                    if len(reads) == 1:
                        raise ConnectionError("the store is unavailable")
                return await read(namespace, claiming=claiming)

            limits.list_rules = failing_first  # type: ignore[method-assign]
            worker = app.worker()
            task = asyncio.create_task(worker.run())
            try:
                # The failed read, then the next claim's read (after the failure pause): any
                # claim made without the rules came before it.
                await wait_for(lambda: len(reads) >= 2 or started, "the rules read again", 20)
            finally:
                worker.stop()
                await task
            timer = await app.get("r1")
            return started, timer.status, len(reads)

    started, status, reads = asyncio.run(main())
    assert reads >= 2
    assert started == []
    assert status is Status.SCHEDULED


def test_a_failed_re_read_keeps_the_last_rules(tmp_path: Path) -> None:
    async def main() -> tuple[list[str], Status, int]:
        app = AsyncApp(f"sqlite:///{tmp_path / 'reread.db'}")
        started: list[str] = []

        @app.handler("report")
        async def report(event: Event) -> None:
            started.append(event.key)

        async with app:
            await app.pause("report")
            await app.schedule("report", None, key="r1", at=datetime.now(UTC) - timedelta(1))
            limits = app.store.limits
            read = limits.list_rules
            reads: list[int] = []

            async def failing_later(namespace: str, *, claiming: bool = False) -> list[FlowRule]:
                if claiming:
                    reads.append(len(reads))
                    if len(reads) > 1:
                        raise ConnectionError("the store is unavailable")
                return await read(namespace, claiming=claiming)

            limits.list_rules = failing_later  # type: ignore[method-assign]
            worker = app.worker()
            task = asyncio.create_task(worker.run())
            try:
                await wait_for(lambda: len(reads) >= 3, "two failed re-reads", 20)
            finally:
                worker.stop()
                await task
            timer = await app.get("r1")
            return started, timer.status, len(reads)

    started, status, reads = asyncio.run(main())
    assert reads >= 3
    assert started == []
    assert status is Status.SCHEDULED
