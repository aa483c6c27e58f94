"""duetime: ``AsyncApp(url).schedule_many(...)`` to enqueue, ``app.worker().run()`` to work."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from duetime import AsyncApp, Event, TimerRequest, eventloop
from peers import JOB_TYPE, Record, System, chunks, payload_due

SCHEMA = "duetime"
WANTS_UVLOOP = eventloop.chosen() == "uvloop"
"""The worker runs on the loop ``duetime worker`` would use (DUETIME_EVENT_LOOP=asyncio: not
uvloop)."""


class Duetime(System):
    name = "duetime"
    label = "duetime"
    remaining_sql = (
        f"SELECT count(*) FROM {SCHEMA}.timers WHERE status IN ('scheduled', 'retrying', 'running')"
    )

    def url(self, db: str) -> str:
        """The store URL; ``PG_BENCH_DUETIME_PARAMS`` (``--duetime-params``) adds query
        parameters, e.g. ``pool_max=20`` or ``options=-c%20plan_cache_mode%3Dforce_custom_plan``
        for experiments."""
        extra = os.environ.get("PG_BENCH_DUETIME_PARAMS", "")
        return f"{self.base}/{db}?schema={SCHEMA}" + (f"&{extra}" if extra else "")

    def describe(self) -> str:
        from importlib.metadata import version

        extra = os.environ.get("PG_BENCH_DUETIME_PARAMS", "")
        params = f", URL params {extra}" if extra else ""
        loop = eventloop.chosen()
        return f"duetime {version('duetime')} (psycopg {version('psycopg')}, {loop}{params})"

    async def install(self, db: str) -> None:
        async with AsyncApp(self.url(db)) as app:  # migrates and creates the namespace
            limit = os.environ.get("PG_BENCH_DUETIME_LIMIT", "")
            if limit:  # --duetime-limit concurrency=100000,rate=1000000/s: its overhead
                options: dict[str, Any] = dict(part.split("=", 1) for part in limit.split(","))
                for name in ("concurrency", "burst"):
                    if name in options:
                        options[name] = int(options[name])
                await app.set_limit(JOB_TYPE, **options)

    async def enqueue(self, db: str, dues: Sequence[float | None]) -> None:
        async with AsyncApp(self.url(db)) as app:
            for chunk in chunks(dues):
                await app.schedule_many(
                    [
                        TimerRequest(JOB_TYPE, payload_due(due), delay=0)
                        if due is None
                        else TimerRequest(
                            JOB_TYPE, payload_due(due), at=datetime.fromtimestamp(due, UTC)
                        )
                        for due in chunk
                    ]
                )

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
        app = AsyncApp(self.url(db), concurrency=concurrency, batch_size=batch_size)

        @app.handler(JOB_TYPE)
        async def noop(event: Event) -> None:
            payload: Any = event.payload  # {"due": epoch seconds or None}, as enqueued
            record(payload["due"])

        await app.open()
        try:
            ready()
            await go.wait()
            worker = app.worker()
            task = asyncio.create_task(worker.run())
            await stop.wait()
            worker.stop()
            await task
        finally:
            await app.close()
