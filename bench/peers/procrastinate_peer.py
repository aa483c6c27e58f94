"""procrastinate: ``App(connector=PsycopgConnector(...))``, a task, ``run_worker_async``.

Enqueue uses the batch API (``batch_defer_async``; jobs due at different instants go through
``JobManager.batch_defer_jobs_async`` with each job's ``scheduled_at``, which is what
``configure(schedule_at=...)`` sets). The worker runs with its defaults except
``concurrency`` (as for every system) and a connection pool of at most 10 — duetime's default
pool size; procrastinate's own default would follow psycopg_pool's (4).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from procrastinate import App, PsycopgConnector

from peers import JOB_TYPE, Record, System, chunks

POOL_MAX = 10


def make_app(conninfo: str, *, pool_max: int = POOL_MAX) -> App:
    connector = PsycopgConnector(conninfo=conninfo, min_size=1, max_size=pool_max)
    return App(connector=connector)


class Procrastinate(System):
    name = "procrastinate"
    label = "procrastinate"
    remaining_sql = "SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing')"

    def describe(self) -> str:
        from importlib.metadata import version

        return f"procrastinate {version('procrastinate')} (psycopg {version('psycopg')}, asyncio)"

    async def install(self, db: str) -> None:
        app = make_app(self.conninfo(db))
        async with app.open_async():
            await app.schema_manager.apply_schema_async()

    async def enqueue(self, db: str, dues: Sequence[float | None]) -> None:
        app = make_app(self.conninfo(db))

        @app.task(name=JOB_TYPE)
        async def noop(due: float | None) -> None:
            return None

        async with app.open_async():
            for chunk in chunks(dues):
                first = chunk[0]
                if all(due == first for due in chunk):  # one instant: the plain batch API
                    deferrer = (
                        noop.configure()
                        if first is None
                        else noop.configure(schedule_at=datetime.fromtimestamp(first, UTC))
                    )
                    kwargs: list[dict[str, Any]] = [{"due": due} for due in chunk]
                    await deferrer.batch_defer_async(*kwargs)
                    continue
                deferrer = noop.configure()
                jobs = [
                    deferrer.make_new_job(due=due).evolve(
                        scheduled_at=None if due is None else datetime.fromtimestamp(due, UTC)
                    )
                    for due in chunk
                ]
                await app.job_manager.batch_defer_jobs_async(jobs)

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
        app = make_app(self.conninfo(db))

        @app.task(name=JOB_TYPE)
        async def noop(due: float | None) -> None:
            record(due)

        async with app.open_async():
            ready()
            await go.wait()
            task = asyncio.create_task(
                app.run_worker_async(concurrency=concurrency, install_signal_handlers=False)
            )
            stopping = asyncio.create_task(stop.wait())
            await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
            task.cancel()  # procrastinate stops gracefully when its run task is cancelled
            with contextlib.suppress(asyncio.CancelledError):
                await task
