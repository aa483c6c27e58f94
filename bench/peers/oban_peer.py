"""oban (PyPI ``oban``, Oban's Python port): ``Oban(pool=…, queues={"default": N})``, a
``@worker`` class, ``enqueue_many`` in batches.

Installed with ``oban.schema.install`` (its installer). The worker runs with oban's defaults
except the queue limit (``--concurrency``, as for every system) and a pool of at most 10
connections (``Oban.create_pool``'s default). Future jobs are stored ``scheduled`` and a stager
moves those due to ``available`` once a second (``stager={"interval": 1.0}``, its default),
so a future job waits up to a second past its instant. oban needs Python 3.12 or newer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from oban import Job, Oban, worker
from oban.schema import install

from peers import Record, System, chunks

POOL_MAX = 10
_record: list[Record] = []
"""The running worker's ``record`` (a module global: oban builds the worker class itself)."""


@worker(queue="default")
class BenchNoop:
    """The no-op handler, found by oban through its module path."""

    async def process(self, job: Job) -> None:
        if _record:
            _record[0](job.args.get("due"))


class ObanSystem(System):
    name = "oban"
    label = "oban"
    remaining_sql = (
        "SELECT count(*) FROM oban_jobs "
        "WHERE state IN ('scheduled', 'available', 'executing', 'retryable')"
    )

    def describe(self) -> str:
        from importlib.metadata import version

        return (
            f"oban {version('oban')} (psycopg {version('psycopg')}, asyncio; "
            "its stager's default 1 s interval)"
        )

    async def _pool(self, db: str) -> Any:
        return await Oban.create_pool(self.conninfo(db), min_size=1, max_size=POOL_MAX)

    async def install(self, db: str) -> None:
        pool = await self._pool(db)
        try:
            await install(pool)
        finally:
            await pool.close()

    async def enqueue(self, db: str, dues: Sequence[float | None]) -> None:
        pool = await self._pool(db)
        try:
            oban = Oban(pool=pool)  # client mode: no queues, enqueue only
            for chunk in chunks(dues):
                await oban.enqueue_many(
                    [
                        BenchNoop.new(
                            {"due": due},
                            scheduled_at=None if due is None else datetime.fromtimestamp(due, UTC),
                        )
                        for due in chunk
                    ]
                )
        finally:
            await pool.close()

    async def run_worker(
        self,
        db: str,
        *,
        concurrency: int,
        batch_size: int,
        record: Record,
        ready: Callable[[], None],
        go: asyncio.Event,
        stop: asyncio.Event,
    ) -> None:
        _record[:] = [record]
        pool = await self._pool(db)
        try:
            ready()
            await go.wait()
            async with Oban(pool=pool, queues={"default": concurrency}):
                await stop.wait()
        finally:
            await pool.close()
