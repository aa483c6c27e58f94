"""What a metrics scrape reads of every namespace, the same on both backends: its timers by
status and the earliest run time of its pending ones, in two statements however many
namespaces there are (each backend's ``gauge_counts`` and ``gauge_earliest``)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from duetime.model import Status


def gauges(
    counts: Iterable[tuple[str, str, int]], earliest: Iterable[tuple[str, datetime | None]]
) -> dict[str, tuple[dict[Status, int], datetime | None]]:
    """``namespace_gauges`` from the rows of its two statements: (namespace, status, count) and
    (namespace, earliest pending run_at); every namespace has a count for every status."""
    found: dict[str, tuple[dict[Status, int], datetime | None]] = {}
    for namespace, at in earliest:
        found[namespace] = (dict.fromkeys(Status, 0), at)
    for namespace, status, count in counts:
        found.setdefault(namespace, (dict.fromkeys(Status, 0), None))[0][Status(status)] = count
    return found
