"""The deadline watch's metrics, read from the database at scrape time (as the timers' gauges
are), so every process exports the same figures whichever found the misses, and a restart
loses no count: the misses of each schedule (a counter: the watch's durable tally) and the
seconds since its latest occurrence that succeeded in time."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from duetime.model.deadlines import LastSuccess


class ScheduleWatchGauges(Collector):
    """``duetime_schedule_missed_total`` and ``duetime_schedule_since_success_seconds``."""

    def __init__(self) -> None:
        self.rows: Sequence[LastSuccess] = ()
        self.now: datetime | None = None

    def update(self, rows: Sequence[LastSuccess], now: datetime) -> None:
        self.rows, self.now = list(rows), now

    def collect(self) -> Iterable[Metric]:
        missed = CounterMetricFamily(
            "duetime_schedule_missed",
            "Occurrences of a schedule not done by their deadline (must_succeed_within)",
            labels=["namespace", "schedule"],
        )
        since = GaugeMetricFamily(
            "duetime_schedule_since_success_seconds",
            "Seconds since the schedule's latest occurrence that succeeded by its deadline "
            "(since it was first watched, when none has)",
            labels=["namespace", "schedule"],
        )
        now = self.now
        for row in sorted(self.rows, key=lambda r: (r.namespace, r.schedule)):
            labels = [row.namespace, row.schedule]
            missed.add_metric(labels, row.misses)
            if now is not None:
                last = row.since if row.at is None else row.at
                since.add_metric(labels, max((now - last).total_seconds(), 0.0))
        return [missed, since]

    def describe(self) -> Iterable[Metric]:
        return self.collect()
