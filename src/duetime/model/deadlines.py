"""The records of schedule deadlines: what the watch keeps of a schedule, what one round of it
writes, and the events it raises.

The watch judges each occurrence of a schedule with ``must_succeed_within`` once its deadline
has passed, in order, and keeps its place (``checked_through``) with the schedule's tallies in
one row a schedule. A round's :class:`WatchStep` is written in one transaction, fenced by the
place it started from, so two workers (or a retried round) never judge an occurrence twice;
each miss is also a row unique by ``(schedule, nominal instant)``, written with its event.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

MISSED_EVENT = "schedule.missed"
PAUSED_EVENT = "schedule.paused"
WATCH_ACTOR = "python:duetime-watch"
"""The audit log's actor of a pause the watch makes (``python`` is the interface it runs in)."""


def _iso(instant: datetime | None) -> str | None:
    return None if instant is None else instant.isoformat().replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class ScheduleWatch:
    """What the watch knows of one schedule: its place and its tallies."""

    checked_through: datetime
    failures_in_row: int = 0
    misses: int = 0
    last_miss_at: datetime | None = None
    """The nominal instant of the latest missed occurrence."""
    last_miss_reason: str | None = None
    last_success_at: datetime | None = None
    """When the latest occurrence that succeeded in time was done."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "misses": self.misses,
            "failures_in_row": self.failures_in_row,
            "last_miss_at": _iso(self.last_miss_at),
            "last_miss_reason": self.last_miss_reason,
            "last_success_at": _iso(self.last_success_at),
            "checked_through": _iso(self.checked_through),
        }


@dataclass(frozen=True, slots=True)
class Miss:
    """One occurrence not done by its deadline."""

    nominal_at: datetime
    reason: str
    deadline_at: datetime


@dataclass(frozen=True, slots=True)
class WatchStep:
    """One round's judgement of one schedule, written at once or not at all.

    ``since`` is the place the round started from (None: the schedule had no watch row yet):
    the write applies only if the row still says so.
    """

    schedule_id: int
    namespace: str
    name: str
    since: datetime | None
    watch: ScheduleWatch
    misses: tuple[Miss, ...] = ()
    pause: bool = False
    max_attempts: int = 20
    """Of the events it raises."""
    release_after: datetime | None = None
    """A pause withdraws the occurrences made ahead, due after this instant."""
    details: dict[str, Any] = field(default_factory=dict)
    """What every event of the step says of the schedule (its deadline, its pause setting)."""


def missed_event(step: WatchStep, miss: Miss) -> tuple[str, str, dict[str, Any]]:
    """The ``schedule.missed`` event of ``miss``: its type, key (one per occurrence) and
    payload."""
    payload = {
        "schedule": step.name,
        "nominal_at": _iso(miss.nominal_at),
        "deadline_at": _iso(miss.deadline_at),
        "reason": miss.reason,
        **step.details,
    }
    return MISSED_EVENT, f"{MISSED_EVENT}:{step.name}:{_iso(miss.nominal_at)}", payload


def paused_event(step: WatchStep, now: datetime) -> tuple[str, str, dict[str, Any]]:
    """The ``schedule.paused`` event of a pause the watch made."""
    payload = {
        "schedule": step.name,
        "paused_at": _iso(now),
        "failures_in_row": step.watch.failures_in_row,
        "last_miss_at": _iso(step.watch.last_miss_at),
        "last_miss_reason": step.watch.last_miss_reason,
        **step.details,
    }
    return PAUSED_EVENT, f"{PAUSED_EVENT}:{step.name}:{_iso(now)}", payload


def pause_target(step: WatchStep) -> dict[str, Any]:
    """What the audit log's ``schedule_pause`` entry of the watch's pause names."""
    return {
        "schedule": step.name,
        "reason": "failures_in_row",
        "failures_in_row": step.watch.failures_in_row,
    }


def deadline_fields(
    within: timedelta | None, pause_after: int | None, watch: ScheduleWatch | None
) -> dict[str, Any]:
    """What a schedule's JSON view says of its deadline and of what the watch found."""
    return {
        "must_succeed_within": seconds(within),
        "pause_after_failures": pause_after,
        "deadline": None if watch is None else watch.to_dict(),
    }


def seconds(span: timedelta | None) -> float | None:
    return None if span is None else span.total_seconds()


@dataclass(frozen=True, slots=True)
class RecordedMiss:
    """A miss as stored: which schedule, which occurrence, why, and when it was found."""

    schedule_id: int
    schedule: str
    nominal_at: datetime
    reason: str
    deadline_at: datetime
    recorded_at: datetime

    def to_dict(self) -> dict[str, Any]:
        return {
            "schedule": self.schedule,
            "nominal_at": _iso(self.nominal_at),
            "reason": self.reason,
            "deadline_at": _iso(self.deadline_at),
            "recorded_at": _iso(self.recorded_at),
        }


@dataclass(frozen=True, slots=True)
class LastSuccess:
    """A watched schedule's latest success in time (None: none yet, since ``since``) and its
    misses so far."""

    namespace: str
    schedule: str
    at: datetime | None
    since: datetime
    misses: int = 0
