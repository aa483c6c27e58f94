"""The console's charts: throughput and lateness over a chosen range, in buckets, filtered by
event type and node, lateness as percentiles the database computes.

Lateness is the first attempt's true start (``fired_at``) minus the due instant; a timer whose
start was never reported (its attempt lost with its node) is counted in no lateness bucket.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from duetime.errors import InvalidInput

CHART_RANGES: dict[str, tuple[timedelta, timedelta]] = {
    "1h": (timedelta(hours=1), timedelta(minutes=1)),
    "24h": (timedelta(hours=24), timedelta(minutes=15)),
    "7d": (timedelta(days=7), timedelta(hours=1)),
}
"""Each range: its length and its bucket (60, 96 and 168 buckets)."""
PERCENTILES = (0.5, 0.95, 0.99)


@dataclass(frozen=True, slots=True)
class ThroughputCount:
    """Timers of one status (now) whose first attempt started in one bucket."""

    bucket: int
    status: str
    count: int


@dataclass(frozen=True, slots=True)
class LatenessRow:
    """One bucket's lateness in milliseconds: how many started, the percentiles, the worst."""

    bucket: int
    count: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float


@dataclass(frozen=True, slots=True)
class ChartBucket:
    """One bucket of a chart: timers started in it by status now, and their lateness."""

    start: datetime
    fired: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    lateness: LatenessRow | None = None

    def to_dict(self) -> dict[str, Any]:
        late = self.lateness
        return {
            "start": self.start.isoformat().replace("+00:00", "Z"),
            "fired": self.fired,
            "by_status": dict(self.by_status),
            "lateness_p50_ms": None if late is None else late.p50_ms,
            "lateness_p95_ms": None if late is None else late.p95_ms,
            "lateness_p99_ms": None if late is None else late.p99_ms,
            "lateness_max_ms": None if late is None else late.max_ms,
        }


def chart_window(now: datetime, range: str) -> tuple[datetime, datetime, timedelta]:
    """``(since, until, bucket)`` of ``range`` ending with the bucket ``now`` is in, buckets
    aligned to whole multiples of their length since 1970 (so a refresh keeps them)."""
    if range not in CHART_RANGES:
        raise InvalidInput("range", f"must be one of {', '.join(CHART_RANGES)}")
    length, bucket = CHART_RANGES[range]
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    until = epoch + ((now.astimezone(UTC) - epoch) // bucket + 1) * bucket
    return until - length, until, bucket


def chart_series(
    since: datetime,
    until: datetime,
    bucket: timedelta,
    counts: Sequence[ThroughputCount],
    lateness: Sequence[LatenessRow],
) -> list[ChartBucket]:
    """One :class:`ChartBucket` per bucket of ``[since, until)``, quiet ones included."""
    size = (until - since) // bucket
    by_bucket: dict[int, dict[str, int]] = {}
    for count in counts:
        if 0 <= count.bucket < size:
            by_bucket.setdefault(count.bucket, {})[count.status] = count.count
    late = {row.bucket: row for row in lateness if 0 <= row.bucket < size}
    return [
        ChartBucket(
            since + n * bucket,
            sum(by_bucket.get(n, {}).values()),
            by_bucket.get(n, {}),
            late.get(n),
        )
        for n in range(size)
    ]


def interpolated(count: int, p: float, low: float, high: float | None) -> float:
    """``percentile_cont(p)`` of ``count`` ordered values, given the value at rank
    ``floor(p * (count - 1))`` (0-based) and the one after it (None past the last): the same
    linear interpolation PostgreSQL's ``percentile_cont`` makes."""
    position = p * (count - 1)
    fraction = position - math.floor(position)
    if high is None or fraction == 0:
        return low
    return low + fraction * (high - low)
