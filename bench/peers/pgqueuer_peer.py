"""pgqueuer: ``Queries.enqueue`` with lists (its batch API), ``QueueManager.run`` to work.

Like ``pgq run`` it runs on uvloop when uvloop is installed (the child process picks the loop;
see :data:`WANTS_UVLOOP`), on asyncpg when asyncpg is importable (pgqueuer's documented driver,
``--pgq-driver`` overrides), else on psycopg. Jobs due later use ``execute_after`` — a delay
relative to the database's ``now()`` at insert — computed from the wanted instant just before
each batch is sent.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from pgqueuer import QueueManager
from pgqueuer.models import Job
from pgqueuer.queries import Queries

from peers import JOB_TYPE, Record, System, chunks

WANTS_UVLOOP = True


def driver_name() -> str:
    wanted = os.environ.get("PG_BENCH_PGQ_DRIVER", "auto")
    if wanted == "auto":
        try:
            import asyncpg  # type: ignore[import-untyped]  # noqa: F401
        except ImportError:
            return "psycopg"
        return "asyncpg"
    return wanted


class PgQueuerSystem(System):
    name = "pgqueuer"
    label = "pgqueuer"
    remaining_sql = "SELECT count(*) FROM pgqueuer"  # finished jobs move to pgqueuer_log

    def describe(self) -> str:
        from importlib.metadata import version

        return f"pgqueuer {version('pgqueuer')} ({driver_name()}, uvloop when installed)"

    async def _connect(self, db: str) -> tuple[Any, Any]:
        """(driver, closer) for pgqueuer's chosen driver."""
        if driver_name() == "asyncpg":
            import asyncpg
            from pgqueuer.db import AsyncpgDriver

            conn = await asyncpg.connect(self.conninfo(db))
            return AsyncpgDriver(conn), conn.close
        import psycopg
        from pgqueuer.db import PsycopgDriver

        pconn = await psycopg.AsyncConnection.connect(self.conninfo(db), autocommit=True)
        return PsycopgDriver(pconn), pconn.close

    async def install(self, db: str) -> None:
        driver, close = await self._connect(db)
        try:
            await Queries(driver).install()
        finally:
            await close()

    async def enqueue(self, db: str, dues: Sequence[float | None]) -> None:
        driver, close = await self._connect(db)
        try:
            queries = Queries(driver)
            for chunk in chunks(dues):
                now = time.time()
                await queries.enqueue(
                    [JOB_TYPE] * len(chunk),
                    [json.dumps({"due": due}).encode() for due in chunk],
                    [0] * len(chunk),
                    [
                        None if due is None else timedelta(seconds=max(0.0, due - now))
                        for due in chunk
                    ],
                )
        finally:
            await close()

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
        driver, close = await self._connect(db)
        qm = QueueManager(Queries(driver))

        @qm.entrypoint(JOB_TYPE)
        async def noop(job: Job) -> None:
            record(json.loads(job.payload)["due"] if job.payload else None)

        try:
            ready()
            await go.wait()
            # max_concurrent_tasks must be at least twice the batch size.
            batch = max(1, min(batch_size, concurrency // 2))
            task = asyncio.create_task(qm.run(batch_size=batch, max_concurrent_tasks=concurrency))
            stopping = asyncio.create_task(stop.wait())
            await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
            qm.shutdown.set()
            stopping.cancel()
            await task
        finally:
            await close()
