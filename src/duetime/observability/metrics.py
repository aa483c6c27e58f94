"""Prometheus metrics, so operators see firing rates, lateness and backlog per namespace and type.

:class:`Metrics` owns a private :class:`~prometheus_client.CollectorRegistry` (never the global
one, so several apps or tests in one process do not collide) and is a
:class:`~duetime.worker.WorkerObserver`: append it to ``app.observers`` before starting a worker.
The by-status and overdue gauges come from database snapshots taken at scrape time, so any
process (an API without workers, one worker of many) exports the same figures. Each metric is
listed in docs/operating.md#metrics.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol, cast, runtime_checkable

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from duetime.clock import Clock, DatabaseClock
from duetime.model import JSON, Outcome, Status, Timer
from duetime.observability.schedule_watch import ScheduleWatchGauges

if TYPE_CHECKING:
    from duetime.store.protocol import Store

CONTENT_TYPE = CONTENT_TYPE_LATEST

LATENESS_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
    900.0,
    1800.0,
    3600.0,
)
"""From 1 ms (a healthy worker) to 1 h (caught up after an outage)."""

CLAIM_SIZE_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
CLAIM_SECONDS_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
HANDLER_SECONDS_BUCKETS = (0.0005, *LATENESS_BUCKETS[: LATENESS_BUCKETS.index(300.0) + 1])
"""From half a millisecond (a no-op) to 5 minutes (a long job)."""

# No ``_created`` series: they double a scrape and say nothing a counter's reset does not.
disable_created_metrics()  # type: ignore[no-untyped-call]


@dataclass
class DatabaseSnapshot:
    """What the database says of one namespace, read at scrape time (any process can)."""

    counts: Mapping[Status, int]
    oldest_due: datetime | None = None
    """The earliest ``run_at`` of pending work (overdue when before the snapshot's now)."""
    now: datetime | None = None


async def read_snapshot(store: Store, clock: Clock, namespace: str) -> DatabaseSnapshot:
    """One namespace's snapshot: its counts by status and its earliest pending run time (one
    probe of the claim index)."""
    counts = await store.count_by_status(namespace)
    oldest = await store.next_run_at(namespace, None)
    return DatabaseSnapshot(counts, oldest, clock.now())


async def read_snapshots(store: Store, clock: Clock) -> dict[str, DatabaseSnapshot]:
    """Every namespace's snapshot, in as many statements whatever the number of namespaces."""
    now = clock.now()
    return {
        namespace: DatabaseSnapshot(counts, oldest, now)
        for namespace, (counts, oldest) in (await store.namespace_gauges()).items()
    }


class _DatabaseGauges(Collector):
    """Timers by status and the age of the oldest overdue one, per namespace, and this
    process's clock offset to the database: read when a scrape comes, not counted in memory,
    so every process exports the same figures whichever ran the work."""

    def __init__(self) -> None:
        self.snapshot: dict[str, DatabaseSnapshot] = {}
        self.clock: DatabaseClock | None = None

    def collect(self) -> Iterable[Metric]:
        by_status = GaugeMetricFamily(
            "duetime_timers",
            "Timers in the hot table by status (finished ones until archived or deleted)",
            labels=["namespace", "status"],
        )
        pending = GaugeMetricFamily(
            "duetime_pending_timers",
            "Timers waiting to fire (scheduled or retrying)",
            labels=["namespace"],
        )
        dead = GaugeMetricFamily(
            "duetime_dead_timers", "Timers in the dead-letter queue now", labels=["namespace"]
        )
        overdue = GaugeMetricFamily(
            "duetime_oldest_overdue_seconds",
            "How long the oldest due but unclaimed timer has waited (0 when none is overdue)",
            labels=["namespace"],
        )
        for namespace, snap in sorted(self.snapshot.items()):
            counts = snap.counts
            for status in Status:
                by_status.add_metric([namespace, status.value], counts.get(status, 0))
            waiting = counts.get(Status.SCHEDULED, 0) + counts.get(Status.RETRYING, 0)
            pending.add_metric([namespace], waiting)
            dead.add_metric([namespace], counts.get(Status.DEAD, 0))
            age = 0.0
            if snap.oldest_due is not None and snap.now is not None:
                age = max((snap.now - snap.oldest_due).total_seconds(), 0.0)
            overdue.add_metric([namespace], age)
        families: list[Metric] = [by_status, pending, dead, overdue]
        offset = self.clock.offset if self.clock is not None else None
        if offset is not None:
            clock = GaugeMetricFamily(
                "duetime_clock_offset_seconds",
                "How far this machine's clock is behind the database's (negative: ahead)",
            )
            clock.add_metric([], offset.total_seconds())
            families.append(clock)
        return families

    def describe(self) -> Iterable[Metric]:
        return self.collect()


@runtime_checkable
class SourceCounts(Protocol):
    """What a broker source counts of the messages it handled (``duetime.sources``'
    ``SourceStats``), as far as the metrics read it."""

    @property
    def stored(self) -> Mapping[str, int]:
        """By action: ``created``, ``updated``, ``kept``."""
        ...

    @property
    def dead_lettered(self) -> int: ...

    @property
    def deferred(self) -> int: ...

    @property
    def dead_letter_failures(self) -> int: ...


class CountedSource(Protocol):
    """A broker source that counts what it did (both NATS and Redis sources do)."""

    name: str
    stats: SourceCounts


SOURCE_OUTCOMES = ("created", "updated", "kept", "dead_lettered", "deferred", "dead_letter_failed")
"""Each message a source received ends one of these ways (a redelivered one counts again)."""


class _SourceCounters(Collector):
    """``duetime_source_messages_total{source,outcome}``, read from each source's stats."""

    def __init__(self) -> None:
        self.sources: list[CountedSource] = []

    def collect(self) -> Iterable[Metric]:
        family = CounterMetricFamily(
            "duetime_source_messages",
            "Broker messages a source handled, by outcome: stored (created, updated, kept), "
            "dead_lettered, deferred (left for redelivery), dead_letter_failed",
            labels=["source", "outcome"],
        )
        for source in self.sources:
            stats = source.stats
            counts = {
                "created": stats.stored["created"],
                "updated": stats.stored["updated"],
                "kept": stats.stored["kept"],
                "dead_lettered": stats.dead_lettered,
                "deferred": stats.deferred,
                "dead_letter_failed": stats.dead_letter_failures,
            }
            for outcome in SOURCE_OUTCOMES:
                family.add_metric([source.name, outcome], counts[outcome])
        return [family]

    def describe(self) -> Iterable[Metric]:
        return self.collect()


class _TypeChildren:
    """The labelled children one (namespace, type) feeds on every attempt, looked up once:
    ``labels()`` costs more than the increment itself."""

    __slots__ = ("duration", "in_flight", "lateness", "outcomes", "started")

    def __init__(self, metrics: Metrics, namespace: str, type: str) -> None:
        self.started = metrics.started_total.labels(namespace, type)
        self.lateness = metrics.lateness.labels(namespace, type)
        self.duration = metrics.handler_seconds.labels(namespace, type)
        self.in_flight = metrics.in_flight.labels(namespace)
        self.outcomes = {
            outcome: metrics.attempts.labels(namespace, type, outcome.value) for outcome in Outcome
        }


class Metrics:
    """The metrics of one process; also the observer that feeds them from workers."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        labels = ["namespace", "type"]
        self.attempts = Counter(
            "duetime_attempts",
            "Attempts that ended, by outcome (done, retry, dead, expired, cancelled, snoozed, "
            "lost, released, fanned_out)",
            [*labels, "outcome"],
            registry=self.registry,
        )
        self.started_total = Counter(
            "duetime_attempts_started",
            "Attempts started: a handler was given the timer",
            labels,
            registry=self.registry,
        )
        self.cancelled_by_request = Counter(
            "duetime_cancelled_by_request",
            "Pending timers cancelled by a request (API, CLI or App.cancel through the API)",
            labels,
            registry=self.registry,
        )
        self.lateness = Histogram(
            "duetime_lateness_seconds",
            "How late an attempt started: start time minus due time",
            labels,
            buckets=LATENESS_BUCKETS,
            registry=self.registry,
        )
        self.handler_seconds = Histogram(
            "duetime_handler_duration_seconds",
            "How long a handler ran, from its start to its outcome",
            labels,
            buckets=HANDLER_SECONDS_BUCKETS,
            registry=self.registry,
        )
        self.in_flight = Gauge(
            "duetime_attempts_in_flight",
            "Handlers running now in this process",
            ["namespace"],
            registry=self.registry,
        )
        self.destinations = Counter(
            "duetime_destination_deliveries",
            "Deliveries to a destination that ended, by outcome",
            ["namespace", "destination", "outcome"],
            registry=self.registry,
        )
        self.claim_size = Histogram(
            "duetime_claim_batch_size",
            "Timers claimed per claim",
            ["namespace"],
            buckets=CLAIM_SIZE_BUCKETS,
            registry=self.registry,
        )
        self.claim_seconds = Histogram(
            "duetime_claim_duration_seconds",
            "How long one claim of due timers took (its database round trip)",
            ["namespace"],
            buckets=CLAIM_SECONDS_BUCKETS,
            registry=self.registry,
        )
        self.limited = Counter(
            "duetime_limited",
            "Claims that found a flow control limit full: due timers of its types waited "
            "(their lateness shows in duetime_lateness_seconds)",
            ["namespace", "rule"],
            registry=self.registry,
        )
        self.windows_over_rate = Counter(
            "duetime_window_over_rate",
            "Timers stored with a run window their type's rate limit cannot start them all "
            "within (the warning window_over_rate)",
            labels,
            registry=self.registry,
        )
        self._gauges = _DatabaseGauges()
        self.registry.register(self._gauges)
        self._sources = _SourceCounters()
        self.registry.register(self._sources)
        self.schedule_watch = ScheduleWatchGauges()
        self.registry.register(self.schedule_watch)
        self._children: dict[str, dict[str, _TypeChildren]] = {}
        self._running: dict[int, float] = {}  # timer id → when its handler started

    def _of(self, timer: Timer) -> _TypeChildren:
        by_type = self._children.get(timer.namespace)
        if by_type is None:
            by_type = self._children[timer.namespace] = {}
        children = by_type.get(timer.type)
        if children is None:
            children = by_type[timer.type] = _TypeChildren(self, timer.namespace, timer.type)
        return children

    # -- WorkerObserver ---------------------------------------------------------------------
    def claimed(self, namespace: str, count: int, seconds: float) -> None:
        self.claim_size.labels(namespace).observe(count)
        self.claim_seconds.labels(namespace).observe(max(seconds, 0.0))

    def started(self, timer: Timer, attempt: int, lateness: timedelta) -> None:
        children = self._of(timer)
        children.started.inc()
        children.lateness.observe(max(lateness.total_seconds(), 0.0))
        children.in_flight.inc()
        self._running[timer.id] = time.perf_counter()

    def finished(self, timer: Timer, outcome: Outcome) -> None:
        children = self._of(timer)
        children.outcomes[outcome].inc()
        began = self._running.pop(timer.id, None)
        if began is not None:  # a handler ran (not: expired, no handler, released unstarted)
            children.duration.observe(time.perf_counter() - began)
            children.in_flight.dec()
        if timer.destination is not None:
            self.destinations.labels(timer.namespace, timer.destination, outcome.value).inc()

    def held_back(self, namespace: str, pattern: str) -> None:
        self.limited.labels(namespace, pattern).inc()

    def idle(self, namespace: str, next_due: datetime | None) -> None:
        return None  # no metric: the next due time is the database gauges' to tell

    # -- other sources ----------------------------------------------------------------------
    def window_over_rate(self, namespace: str, type: str) -> None:
        """A put warned that a window cannot hold its timers at their type's rate."""
        self.windows_over_rate.labels(namespace, type).inc()

    def cancelled(self, namespace: str, type: str) -> None:
        """A cancel by request (API or CLI)."""
        self.cancelled_by_request.labels(namespace, type).inc()

    def set_counts(self, counts: Mapping[str, Mapping[Status, int]]) -> None:
        """Replace the by-status snapshot (call right before rendering a scrape)."""
        self.set_snapshot({ns: DatabaseSnapshot(dict(c)) for ns, c in counts.items()})

    def set_snapshot(self, snapshot: Mapping[str, DatabaseSnapshot]) -> None:
        """Replace what the database said (call right before rendering a scrape)."""
        self._gauges.snapshot = dict(snapshot)

    def watch_clock(self, clock: Clock) -> None:
        """Export ``clock``'s offset to the database, when it is a database clock."""
        if isinstance(clock, DatabaseClock):
            self._gauges.clock = clock

    def watch_sources(self, sources: Iterable[object]) -> None:
        """Export the message counts of ``sources`` (one without ``stats`` is skipped)."""
        for source in sources:
            if isinstance(getattr(source, "stats", None), SourceCounts):
                self._sources.sources.append(cast(CountedSource, source))

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric in this registry."""
        return generate_latest(self.registry)

    def lateness_summary(self, namespace: str) -> dict[str, JSON]:
        """The lateness histogram of one namespace, all types summed, for the dashboard."""
        cumulative: dict[float, float] = dict.fromkeys((*LATENESS_BUCKETS, math.inf), 0.0)
        total = count = 0.0
        for metric in self.lateness.collect():
            for sample in metric.samples:
                if sample.labels.get("namespace") != namespace:
                    continue
                if sample.name.endswith("_bucket"):
                    cumulative[float(sample.labels["le"])] += sample.value
                elif sample.name.endswith("_sum"):
                    total += sample.value
                elif sample.name.endswith("_count"):
                    count += sample.value
        buckets: list[JSON] = [
            {"le": None if math.isinf(le) else le, "count": int(value)}
            for le, value in sorted(cumulative.items())
        ]
        return {"buckets": buckets, "count": int(count), "sum": total}
