"""The records of retention and the event log: what the store's history part takes and returns.

Finished timers are kept for ``retention`` and then deleted; on PostgreSQL they first move,
``archive_after`` they finished, to history tables partitioned by month. The event log reads
the same rows: an event is a timer that fired, and its deliveries are its attempts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from duetime.errors import InvalidInput
from duetime.model import JSON, Attempt, Timer


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """What the maintenance step keeps, moves and deletes.

    Terminal timers (done, cancelled, expired) finished more than ``archive_after`` ago move to
    the history tables (PostgreSQL; SQLite keeps one table). Dead timers stay in the hot table,
    where they can be replayed. Anything finished more than ``retention`` ago is deleted — on
    PostgreSQL a whole month of history at a time, so up to a month later.
    """

    retention: timedelta = timedelta(days=30)
    archive_after: timedelta = timedelta(hours=1)
    batch_size: int = 2000
    """Rows per statement: each batch is its own short transaction."""
    months_ahead: int = 2
    """History partitions made ahead of the current month, so none is created in a hurry."""

    def __post_init__(self) -> None:
        if self.retention <= timedelta(0):
            raise InvalidInput("retention", "must be a positive duration")
        if self.archive_after <= timedelta(0):
            raise InvalidInput("archive_after", "must be a positive duration")
        if self.archive_after >= self.retention:
            raise InvalidInput("archive_after", "must be shorter than retention")
        if self.batch_size < 1 or self.months_ahead < 0:
            raise ValueError("batch_size must be at least 1 and months_ahead not negative")

    def archive_before(self, now: datetime) -> datetime:
        return now - self.archive_after

    def delete_before(self, now: datetime) -> datetime:
        return now - self.retention


@dataclass(frozen=True, slots=True)
class MaintenanceReport:
    """What one maintenance round did."""

    archived: int = 0
    """Timers moved to the history tables (with their attempts)."""
    deleted: int = 0
    """Timers (and their attempts) deleted from the hot table, past retention."""
    partitions_created: tuple[str, ...] = ()
    partitions_dropped: tuple[str, ...] = ()
    audit_deleted: int = 0
    """Audit log entries deleted, past the same retention."""

    def __add__(self, other: MaintenanceReport) -> MaintenanceReport:
        return MaintenanceReport(
            self.archived + other.archived,
            self.deleted + other.deleted,
            self.partitions_created + other.partitions_created,
            self.partitions_dropped + other.partitions_dropped,
            self.audit_deleted + other.audit_deleted,
        )

    @property
    def changed(self) -> bool:
        return bool(
            self.archived
            or self.deleted
            or self.partitions_created
            or self.partitions_dropped
            or self.audit_deleted
        )

    def to_dict(self) -> dict[str, JSON]:
        return {
            "archived": self.archived,
            "deleted": self.deleted,
            "partitions_created": list(self.partitions_created),
            "partitions_dropped": list(self.partitions_dropped),
            "audit_deleted": self.audit_deleted,
        }


@dataclass(frozen=True, slots=True)
class EventFilter:
    """Which events the log lists: ``type`` is an exact type or a glob (``order.*``);
    ``since`` (inclusive) and ``until`` (exclusive) bound ``fired_at``."""

    type: str | None = None
    since: datetime | None = None
    until: datetime | None = None


@dataclass(frozen=True, slots=True)
class LoggedEvent:
    """One entry of the event log: a timer that fired, and its deliveries (attempts) so far.

    When routes fan an event out, the event's own attempt says ``fanned_out`` and to whom, and
    each delivery is an entry of its own with ``timer.destination`` set.
    """

    timer: Timer
    deliveries: tuple[Attempt, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, JSON]:
        return {
            **self.timer.to_dict(),
            "deliveries": [attempt.to_dict() for attempt in self.deliveries],
        }


@dataclass(frozen=True, slots=True)
class ActivityCount:
    """Timers of one status that fired in one minute of a window, as a store counts them:
    ``minute`` is the minute's index from the window's start; lateness is ``fired_at - due_at``
    (the first attempt's start against the due time), summed and at most, in milliseconds."""

    minute: int
    status: str
    count: int
    lateness_sum_ms: float
    lateness_max_ms: float


@dataclass(frozen=True, slots=True)
class ActivityMinute:
    """One minute of throughput and lateness: timers that fired in it, by their status now."""

    start: datetime
    fired: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    lateness_mean_ms: float | None = None
    lateness_max_ms: float | None = None

    def to_dict(self) -> dict[str, JSON]:
        return {
            "start": self.start.isoformat().replace("+00:00", "Z"),
            "fired": self.fired,
            "by_status": dict(self.by_status),
            "lateness_mean_ms": self.lateness_mean_ms,
            "lateness_max_ms": self.lateness_max_ms,
        }
