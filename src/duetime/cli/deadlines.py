"""How the command line shows a schedule's deadline and what the deadline watch found of it."""

from __future__ import annotations

from datetime import timedelta

from duetime.cli import output
from duetime.model import Schedule


def span_text(span: timedelta) -> str:
    """``30m``, ``1h30m``, ``45s``, ``2d``: the span in its largest whole units."""
    seconds = int(span.total_seconds())
    parts = []
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)):
        if seconds >= size:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return "".join(parts) or f"{span.total_seconds():g}s"


def deadline_cell(schedule: Schedule) -> str:
    """The ``ls`` column: the deadline and, once any, the misses with the latest reason
    (``30m, 2 missed (dead)``); ``-`` without a deadline."""
    if schedule.must_succeed_within is None:
        return "-"
    text = span_text(schedule.must_succeed_within)
    watch = schedule.watch
    if watch is not None and watch.misses:
        text += f", {watch.misses} missed ({watch.last_miss_reason})"
    return text


def deadline_rows(schedule: Schedule) -> list[tuple[str, str]]:
    """The ``show`` rows of a watched schedule (none for another)."""
    rows: list[tuple[str, str]] = []
    if schedule.must_succeed_within is not None:
        rows.append(("must_succeed_within", span_text(schedule.must_succeed_within)))
    if schedule.pause_after_failures is not None:
        rows.append(("pause_after_failures", str(schedule.pause_after_failures)))
    watch = schedule.watch
    if rows and watch is not None:
        rows += [
            ("misses", str(watch.misses)),
            ("last_miss", f"{output.when(watch.last_miss_at)} ({watch.last_miss_reason})"),
            ("last_success_at", output.when(watch.last_success_at)),
            ("failures_in_row", str(watch.failures_in_row)),
        ]
    return rows
