"""Sources: schedule requests arriving as broker messages (NATS JetStream, Redis Streams, Kafka).

A source consumes messages, maps each to a timer (see :mod:`duetime.sources.base` for the
mappings: a TimerRequest object, a ScheduleTimer command, a schedule-event message),
stores it through the app, and acknowledges the message only after the timer is committed.
Malformed messages go to a dead-letter subject/stream with the reason; they never crash the
consumer and are never lost.

Run sources in a worker process::

    stop = asyncio.Event()  # set it on SIGTERM
    sources = [NatsSource(app, "nats://localhost:4222", "timers.schedule", create_stream=True)]
    await run_worker_with_sources(app, sources, stop)

or build them from configuration with :func:`parse_sources` and :func:`build_sources`.
The broker sources live in :mod:`.nats_source` and :mod:`.redis_source` (``duetime[brokers]``)
and :mod:`.kafka_source` (``duetime[kafka]``); this package imports no client until one is built.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from duetime.app.facade import AsyncApp
from duetime.app.runner import Runner
from duetime.errors import InvalidInput
from duetime.sources.base import (
    Rejection,
    ScheduleCommand,
    Source,
    SourceStats,
    sleep_until_stopped,
)
from duetime.sources.config import SourceSpec, parse_sources
from duetime.sources.mappings import (
    CommandMapping,
    DelayedNotificationMapping,
    ServiceCallTimerMapping,
    TimerRequestMapping,
    make_mapping,
)
from duetime.validation import parse_json_text
from duetime.worker import Worker

log = logging.getLogger("duetime.sources")

__all__ = [
    "CommandMapping",
    "DelayedNotificationMapping",
    "Rejection",
    "ScheduleCommand",
    "ServiceCallTimerMapping",
    "Source",
    "SourceIntake",
    "SourceSpec",
    "SourceStats",
    "TimerRequestMapping",
    "build_source",
    "build_sources",
    "make_mapping",
    "parse_sources",
    "run_sources",
    "run_worker_with_sources",
    "sources_from_json",
]

_CLIENT_PACKAGES = {"nats": "nats-py", "redis": "redis", "kafka": "confluent-kafka"}
MAX_RESTART_DELAY = 30.0


def build_source(spec: SourceSpec, app: AsyncApp) -> Source:
    """The source ``spec`` describes, storing into ``app``. Nothing connects until it runs."""
    options = spec.broker_options
    try:
        if spec.kind == "nats":
            from duetime.sources.nats_source import NatsSource

            return NatsSource(app, command=spec.command, name=spec.name, **options)
        if spec.kind == "kafka":
            from duetime.sources.kafka_source import KafkaSource

            return KafkaSource(app, command=spec.command, name=spec.name, **options)
        from duetime.sources.redis_source import RedisSource

        return RedisSource(app, command=spec.command, name=spec.name, **options)
    except ImportError as exc:
        package = _CLIENT_PACKAGES.get(spec.kind, exc.name or "?")
        extra = "kafka" if spec.kind == "kafka" else "brokers"
        raise InvalidInput(
            "kind",
            f"{spec.kind} sources need the {package!r} package: pip install 'duetime[{extra}]'",
        ) from exc


def build_sources(specs: Iterable[SourceSpec], app: AsyncApp) -> list[Source]:
    """Build every spec; a bad one fails here, before any message is consumed."""
    return [build_source(spec, app) for spec in specs]


def sources_from_json(text: str, app: AsyncApp, path: str = "sources") -> list[Source]:
    """Sources from JSON text (a config file's content or ``DUETIME_SOURCES``)."""
    return build_sources(parse_sources(parse_json_text(text, path), path).values(), app)


async def run_sources(app: AsyncApp, sources: Sequence[Source], stop: asyncio.Event) -> None:
    """Run every source until ``stop`` is set; one that fails is logged and restarted.

    The app is opened first, so a misconfigured database fails here rather than message by
    message. Returns once every source has returned (after ``stop``).
    """
    await app.open()
    names = [source.name for source in sources]
    if len(set(names)) != len(names):
        raise InvalidInput("sources", f"source names must be unique, got {names}")
    await asyncio.gather(*(_supervise(source, stop) for source in sources))


async def _supervise(source: Source, stop: asyncio.Event) -> None:
    """Keep one source running: a crash (a bug, not an outage) is logged and retried later."""
    delay = 1.0
    while not stop.is_set():
        try:
            await source.run(stop)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("source %s crashed; restarting in %.0fs", source.name, delay)
            await sleep_until_stopped(stop, delay)
            delay = min(delay * 2, MAX_RESTART_DELAY)
        else:
            return


async def run_worker_with_sources(
    app: AsyncApp, sources: Sequence[Source], stop: asyncio.Event, *, worker: Worker | None = None
) -> None:
    """A worker process that also consumes sources; both stop when ``stop`` is set.

    If the worker itself fails, the sources are stopped too and the error is raised: storing
    timers that nothing fires would only hide the failure.
    """
    await app.open()
    await Runner([worker or app.worker()], intake=SourceIntake(app, sources)).run(stop)


@dataclass(frozen=True)
class SourceIntake:
    """``sources`` storing through ``app``, as a process runner runs them beside its workers."""

    app: AsyncApp
    sources: Sequence[Source]

    def describe(self) -> str:
        names = ", ".join(source.name for source in self.sources)
        return f"sources into namespace {self.app.namespace}: {names}"

    async def open(self) -> None:
        await self.app.open()

    async def run(self, stop: asyncio.Event) -> None:
        await run_sources(self.app, self.sources, stop)
