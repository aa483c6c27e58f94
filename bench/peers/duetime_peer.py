"""duetime: ``AsyncApp(url).schedule_many(...)`` to enqueue, ``app.worker().run()`` to work.

Two more systems are duetime with its observability on, to price it against plain duetime in
alternating rounds: ``duetime_metrics`` (the Prometheus metrics a ``duetime worker
--metrics-port`` keeps, fed by every attempt) and ``duetime_tracing`` (OpenTelemetry: the SDK's
``BatchSpanProcessor`` to an exporter that drops the spans, on the enqueue side too, so every
timer carries a trace context its process span is parented by); ``duetime_sampled`` is the
latter with 10% of traces sampled (``ParentBased(TraceIdRatioBased(0.1))`` on both sides, so a
worker records the spans of exactly the traces the scheduler sampled)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from duetime import AsyncApp, Event, TimerRequest
from duetime.support import eventloop
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

    def app(self, db: str, **settings: Any) -> AsyncApp:
        """The app the benchmark enqueues and works with (the variants add observability)."""
        return AsyncApp(self.url(db), **settings)

    async def install(self, db: str) -> None:
        async with self.app(db) as app:  # migrates and creates the namespace
            limit = os.environ.get("PG_BENCH_DUETIME_LIMIT", "")
            if limit:  # --duetime-limit concurrency=100000,rate=1000000/s: its overhead
                options: dict[str, Any] = dict(part.split("=", 1) for part in limit.split(","))
                for name in ("concurrency", "burst"):
                    if name in options:
                        options[name] = int(options[name])
                await app.limits.set(JOB_TYPE, **options)

    async def enqueue(self, db: str, dues: Sequence[float | None]) -> None:
        async with self.app(db) as app:
            for chunk in chunks(dues):
                await app.timers.schedule_many(
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
        app = self.app(db, concurrency=concurrency, batch_size=batch_size)

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


class DuetimeMetrics(Duetime):
    name = "duetime_metrics"
    label = "duetime +metrics"

    def app(self, db: str, **settings: Any) -> AsyncApp:
        from duetime.observability.metrics import Metrics

        app = super().app(db, **settings)
        metrics = Metrics()  # what run_process(metrics=...) sets up, without the HTTP server
        app.observers.append(metrics)
        metrics.watch_clock(app.clock)
        return app


class DuetimeSealed(Duetime):
    """duetime with every payload sealed at rest (AES-256-GCM, one key): sealed as enqueued,
    opened as claimed."""

    name = "duetime_sealed"
    label = "duetime +sealed"
    KEYS = "bench:" + "A" * 43 + "="  # 32 zero-ish bytes: the cost, not the secrecy, is measured

    def app(self, db: str, **settings: Any) -> AsyncApp:
        return AsyncApp(self.url(db), seal_keys=self.KEYS, **settings)


class DuetimeTracing(Duetime):
    name = "duetime_tracing"
    label = "duetime +tracing"
    ratio = 1.0

    def __init__(self, base: str) -> None:
        super().__init__(base)
        self._provider: Any = None

    def app(self, db: str, **settings: Any) -> AsyncApp:
        if self._provider is None:
            self._provider = dropping_provider(self.ratio)
        return AsyncApp(self.url(db), tracer_provider=self._provider, **settings)

    def describe(self) -> str:
        from importlib.metadata import version

        sdk = version("opentelemetry-sdk")
        return f"{super().describe()}, opentelemetry-sdk {sdk}, {self.ratio:.0%} of traces sampled"


class DuetimeSampled(DuetimeTracing):
    name = "duetime_sampled"
    label = "duetime +tracing 10%"
    ratio = 0.1


def dropping_provider(ratio: float = 1.0) -> Any:
    """An SDK tracer provider exporting through a BatchSpanProcessor (as in production) to an
    exporter that drops what it gets: the spans' cost in the worker, none of a collector's."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    class Dropping(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(ratio)))
    provider.add_span_processor(BatchSpanProcessor(Dropping()))
    return provider
