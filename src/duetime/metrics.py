"""Prometheus metrics, so operators see firing rates, lateness and backlog per namespace and type.

:class:`Metrics` owns a private :class:`~prometheus_client.CollectorRegistry` (never the global
one, so several apps or tests in one process do not collide) and is a
:class:`~duetime.worker.WorkerObserver`: append it to ``app.observers`` before starting a worker.
The pending and dead gauges come from ``count_by_status`` snapshots taken at scrape time.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Protocol, cast

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from duetime.clock import Clock, DatabaseClock
from duetime.model import JSON, Outcome, Status, Timer

if TYPE_CHECKING:
    from duetime.sources.base import Source, SourceStats

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

_OUTCOME_COUNTERS = {
    Outcome.DONE: "done",
    Outcome.RETRY: "retried",
    Outcome.DEAD: "dead",
    Outcome.EXPIRED: "expired",
    Outcome.CANCELLED: "cancelled",
    Outcome.SNOOZED: "snoozed",
}


class _StatusGauges(Collector):
    """Pending and dead timers per namespace, from the latest ``count_by_status`` snapshot."""

    def __init__(self) -> None:
        self.snapshot: dict[str, dict[Status, int]] = {}

    def collect(self) -> Iterable[Metric]:
        pending = GaugeMetricFamily(
            "duetime_pending_timers",
            "Timers waiting to fire (scheduled or retrying)",
            labels=["namespace"],
        )
        dead = GaugeMetricFamily(
            "duetime_dead_timers", "Timers in the dead-letter queue now", labels=["namespace"]
        )
        for namespace, counts in sorted(self.snapshot.items()):
            waiting = counts.get(Status.SCHEDULED, 0) + counts.get(Status.RETRYING, 0)
            pending.add_metric([namespace], waiting)
            dead.add_metric([namespace], counts.get(Status.DEAD, 0))
        return [pending, dead]

    def describe(self) -> Iterable[Metric]:
        return self.collect()


class CountedSource(Protocol):
    """A broker source that counts what it did (both NATS and Redis sources do)."""

    name: str
    stats: SourceStats


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


class _ClockGauge(Collector):
    """This process's wall clock against the database's, as its clock read it last."""

    def __init__(self) -> None:
        self.clock: DatabaseClock | None = None

    def collect(self) -> Iterable[Metric]:
        gauge = GaugeMetricFamily(
            "duetime_clock_offset_seconds",
            "The database's clock minus this machine's wall clock at the last sync (positive: "
            "this machine is behind); due times and leases follow the database either way",
        )
        offset = None if self.clock is None else self.clock.offset
        if offset is not None:
            gauge.add_metric([], offset.total_seconds())
        yield gauge

    def describe(self) -> Iterable[Metric]:
        return self.collect()


class Metrics:
    """The metrics of one process; also the observer that feeds them from workers."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        labels = ["namespace", "type"]
        self.counters: dict[str, Counter] = {
            name: Counter(
                f"duetime_timers_{name}",
                f"Timer attempts that ended {name}",
                labels,
                registry=self.registry,
            )
            for name in ("done", "retried", "dead", "expired", "cancelled", "snoozed")
        }
        self.fired = Counter(
            "duetime_timers_fired",
            "Attempts started: a handler was given the timer",
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
        self.claim_size = Histogram(
            "duetime_claim_batch_size",
            "Timers claimed per claim",
            ["namespace"],
            buckets=CLAIM_SIZE_BUCKETS,
            registry=self.registry,
        )
        self.claim_seconds = Histogram(
            "duetime_claim_duration_seconds",
            "How long one claim of due timers took",
            ["namespace"],
            buckets=CLAIM_SECONDS_BUCKETS,
            registry=self.registry,
        )
        self._gauges = _StatusGauges()
        self.registry.register(self._gauges)
        self._sources = _SourceCounters()
        self.registry.register(self._sources)
        self._clock = _ClockGauge()
        self.registry.register(self._clock)

    # -- WorkerObserver ---------------------------------------------------------------------
    def claimed(self, namespace: str, count: int, seconds: float) -> None:
        self.claim_size.labels(namespace).observe(count)
        self.claim_seconds.labels(namespace).observe(max(seconds, 0.0))

    def started(self, timer: Timer, attempt: int, lateness: timedelta) -> None:
        self.fired.labels(timer.namespace, timer.type).inc()
        self.lateness.labels(timer.namespace, timer.type).observe(
            max(lateness.total_seconds(), 0.0)
        )

    def finished(self, timer: Timer, outcome: Outcome) -> None:
        name = _OUTCOME_COUNTERS.get(outcome)
        if name is not None:
            self.counters[name].labels(timer.namespace, timer.type).inc()

    # -- other sources ----------------------------------------------------------------------
    def cancelled(self, namespace: str, type: str) -> None:
        """A cancel by request (API or CLI), counted with the handlers' cancellations."""
        self.counters["cancelled"].labels(namespace, type).inc()

    def set_counts(self, counts: Mapping[str, Mapping[Status, int]]) -> None:
        """Replace the pending/dead snapshot (call right before rendering a scrape)."""
        self._gauges.snapshot = {ns: dict(by_status) for ns, by_status in counts.items()}

    def watch_clock(self, clock: Clock) -> None:
        """Export the offset ``clock`` measures, when it is the database's."""
        self._clock.clock = clock if isinstance(clock, DatabaseClock) else None

    def watch_sources(self, sources: Iterable[Source]) -> None:
        """Export the message counts of ``sources`` (one without ``stats`` is skipped)."""
        from duetime.sources.base import SourceStats

        for source in sources:
            if isinstance(getattr(source, "stats", None), SourceStats):
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
