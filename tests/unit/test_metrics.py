"""Metrics: the worker observer feeds counters and histograms in a private registry."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import REGISTRY

from duetime.clock import ClockReading, DatabaseClock
from duetime.model import Outcome, Status, Timer
from duetime.observability.metrics import LATENESS_BUCKETS, DatabaseSnapshot, Metrics
from duetime.sources import SourceStats

NOW = datetime(2031, 1, 1, tzinfo=UTC)


def timer(namespace: str = "shop", type: str = "greet") -> Timer:
    return Timer(
        id=1,
        namespace=namespace,
        key="k",
        type=type,
        payload=None,
        subject=None,
        due_at=NOW,
        status=Status.RUNNING,
        attempts=1,
        max_attempts=3,
        registered_at=NOW,
        updated_at=NOW,
        run_at=NOW,
    )


def value(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_attempts_are_counted_by_namespace_type_and_outcome() -> None:
    metrics = Metrics()
    metrics.started(timer(), 1, timedelta(milliseconds=3))
    outcomes = (Outcome.DONE, Outcome.RETRY, Outcome.DEAD, Outcome.EXPIRED, Outcome.LOST)
    for outcome in outcomes:
        metrics.finished(timer(), outcome)
    metrics.finished(timer(type="other"), Outcome.DONE)
    labels = {"namespace": "shop", "type": "greet"}
    assert value(metrics, "duetime_attempts_started_total", **labels) == 1
    for outcome in outcomes:
        total = value(metrics, "duetime_attempts_total", outcome=outcome.value, **labels)
        assert total == 1, outcome
    assert value(metrics, "duetime_attempts_total", outcome="done", namespace="shop", type="other")
    metrics.cancelled("shop", "greet")
    assert value(metrics, "duetime_cancelled_by_request_total", **labels) == 1
    assert "_created" not in metrics.render().decode()


def test_a_handler_in_flight_is_gauged_and_timed_until_its_outcome() -> None:
    metrics = Metrics()
    metrics.started(timer(), 1, timedelta(0))
    assert value(metrics, "duetime_attempts_in_flight", namespace="shop") == 1
    metrics.finished(timer(), Outcome.DONE)
    assert value(metrics, "duetime_attempts_in_flight", namespace="shop") == 0
    labels = {"namespace": "shop", "type": "greet"}
    assert value(metrics, "duetime_handler_duration_seconds_count", **labels) == 1
    metrics.finished(timer(), Outcome.EXPIRED)  # never started: no duration, gauge unmoved
    assert value(metrics, "duetime_handler_duration_seconds_count", **labels) == 1
    assert value(metrics, "duetime_attempts_in_flight", namespace="shop") == 0


def test_deliveries_to_a_destination_are_counted_by_outcome() -> None:
    metrics = Metrics()
    delivery = replace(timer(), destination="hook")
    metrics.finished(delivery, Outcome.RETRY)
    metrics.finished(delivery, Outcome.DONE)
    labels = {"namespace": "shop", "destination": "hook"}
    assert value(metrics, "duetime_destination_deliveries_total", outcome="retry", **labels) == 1
    assert value(metrics, "duetime_destination_deliveries_total", outcome="done", **labels) == 1


def test_lateness_histogram_spans_a_millisecond_to_an_hour() -> None:
    assert LATENESS_BUCKETS[0] == 0.001
    assert LATENESS_BUCKETS[-1] == 3600
    metrics = Metrics()
    metrics.started(timer(), 1, timedelta(milliseconds=2))
    metrics.started(timer(), 1, timedelta(seconds=-1))  # early by clock skew counts as 0
    metrics.started(timer(), 1, timedelta(hours=2))
    labels = {"namespace": "shop", "type": "greet"}
    assert value(metrics, "duetime_lateness_seconds_bucket", le="0.001", **labels) == 1
    assert value(metrics, "duetime_lateness_seconds_bucket", le="0.0025", **labels) == 2
    assert value(metrics, "duetime_lateness_seconds_bucket", le="3600.0", **labels) == 2
    assert value(metrics, "duetime_lateness_seconds_bucket", le="+Inf", **labels) == 3
    summary = metrics.lateness_summary("shop")
    assert summary["count"] == 3
    buckets = summary["buckets"]
    assert isinstance(buckets, list)
    assert buckets[0] == {"le": 0.001, "count": 1}
    assert buckets[-1] == {"le": None, "count": 3}
    assert metrics.lateness_summary("elsewhere")["count"] == 0


def test_claims_record_batch_size_and_duration() -> None:
    metrics = Metrics()
    metrics.claimed("shop", 7, 0.004)
    assert value(metrics, "duetime_claim_batch_size_bucket", namespace="shop", le="10.0") == 1
    assert value(metrics, "duetime_claim_batch_size_sum", namespace="shop") == 7
    assert value(metrics, "duetime_claim_duration_seconds_count", namespace="shop") == 1


def test_pending_and_dead_gauges_come_from_the_latest_counts() -> None:
    metrics = Metrics()
    assert value(metrics, "duetime_pending_timers", namespace="shop") is None
    counts = dict.fromkeys(Status, 0) | {Status.SCHEDULED: 4, Status.RETRYING: 1, Status.DEAD: 2}
    metrics.set_counts({"shop": counts})
    assert value(metrics, "duetime_pending_timers", namespace="shop") == 5
    assert value(metrics, "duetime_dead_timers", namespace="shop") == 2
    metrics.set_counts({"shop": dict.fromkeys(Status, 0)})
    assert value(metrics, "duetime_pending_timers", namespace="shop") == 0
    text = metrics.render().decode()
    assert 'duetime_pending_timers{namespace="shop"} 0.0' in text


def test_the_oldest_overdue_age_and_the_statuses_come_from_a_database_snapshot() -> None:
    metrics = Metrics()
    counts = {Status.SCHEDULED: 3, Status.DONE: 9}
    snap = DatabaseSnapshot(counts, NOW - timedelta(seconds=90), NOW)
    metrics.set_snapshot({"shop": snap, "idle": DatabaseSnapshot({}, NOW + timedelta(1), NOW)})
    assert value(metrics, "duetime_oldest_overdue_seconds", namespace="shop") == 90
    assert value(metrics, "duetime_oldest_overdue_seconds", namespace="idle") == 0
    assert value(metrics, "duetime_timers", namespace="shop", status="done") == 9
    assert value(metrics, "duetime_timers", namespace="shop", status="dead") == 0


def test_the_clock_offset_is_exported_once_the_database_clock_has_a_reading() -> None:
    metrics = Metrics()

    async def no_reading() -> None:
        return None

    clock = DatabaseClock(no_reading)
    metrics.watch_clock(clock)
    assert value(metrics, "duetime_clock_offset_seconds") is None
    clock.last = ClockReading(timedelta(milliseconds=1500), timedelta(milliseconds=1))
    assert value(metrics, "duetime_clock_offset_seconds") == 1.5


def test_each_metrics_object_has_its_own_registry() -> None:
    first, second = Metrics(), Metrics()  # no "duplicated timeseries" error
    first.started(timer(), 1, timedelta(0))
    labels = {"namespace": "shop", "type": "greet"}
    assert value(second, "duetime_attempts_started_total", **labels) is None
    assert REGISTRY.get_sample_value("duetime_attempts_started_total", {}) is None


@dataclass
class FakeSource:
    name: str
    stats: SourceStats = field(default_factory=SourceStats)

    async def run(self, stop: asyncio.Event) -> None:
        await stop.wait()


@dataclass
class Uncounted:
    name: str = "uncounted"

    async def run(self, stop: asyncio.Event) -> None:
        await stop.wait()


def test_source_messages_are_counted_by_source_and_outcome_at_scrape_time() -> None:
    metrics = Metrics()
    orders = FakeSource("orders")
    metrics.watch_sources([orders, FakeSource("calls"), Uncounted()])
    assert value(metrics, "duetime_source_messages_total", source="orders", outcome="created") == 0
    orders.stats.stored.update(created=3, updated=1)
    orders.stats.dead_lettered += 2
    orders.stats.deferred += 4
    orders.stats.dead_letter_failures += 1
    expected = {
        "created": 3,
        "updated": 1,
        "kept": 0,
        "dead_lettered": 2,
        "deferred": 4,
        "dead_letter_failed": 1,
    }
    for outcome, count in expected.items():
        assert value(
            metrics, "duetime_source_messages_total", source="orders", outcome=outcome
        ) == (count), outcome
    assert value(metrics, "duetime_source_messages_total", source="calls", outcome="created") == 0
    assert (
        value(metrics, "duetime_source_messages_total", source="uncounted", outcome="kept") is None
    )
    text = metrics.render().decode()
    assert 'duetime_source_messages_total{outcome="created",source="orders"} 3.0' in text


def test_the_clock_offset_is_exported_once_the_databases_clock_is_read() -> None:
    from duetime.clock import DatabaseClock

    async def server() -> datetime:
        return datetime.now(UTC) + timedelta(seconds=90)

    metrics = Metrics()
    clock = DatabaseClock(server)
    metrics.watch_clock(clock)
    assert b"\nduetime_clock_offset_seconds " not in metrics.render()  # not measured yet
    asyncio.run(clock.sync())
    line = next(
        row
        for row in metrics.render().decode().splitlines()
        if row.startswith("duetime_clock_offset_seconds ")
    )
    assert float(line.split()[1]) == pytest.approx(90, abs=1)
