"""History: how finished timers leave the hot path (retention), and how they are read back.

The claim path only reads pending rows, but every finished timer left in the hot table makes
its indexes, its vacuums and its backups bigger. So finished timers are kept for ``retention``
and then deleted; on PostgreSQL they first move, ``archive_after`` they finished, to history
tables partitioned by month, where whole months are dropped once older than ``retention``.

The event log reads the same rows: an event is a timer that fired (``fired_at`` is its time),
and its deliveries are its attempts. This module holds the pure parts: the policy, the report,
the filter of the event log and how its ``type`` glob and ``since`` / ``until`` are read.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from duetime.durations import add_months, parse_duration
from duetime.errors import InvalidInput
from duetime.model import JSON, Attempt, Timer
from duetime.routes import check_pattern
from duetime.tzmath import is_aware

MAX_INSTANT_TEXT = 64
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


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

    def __add__(self, other: MaintenanceReport) -> MaintenanceReport:
        return MaintenanceReport(
            self.archived + other.archived,
            self.deleted + other.deleted,
            self.partitions_created + other.partitions_created,
            self.partitions_dropped + other.partitions_dropped,
        )

    @property
    def changed(self) -> bool:
        return bool(
            self.archived or self.deleted or self.partitions_created or self.partitions_dropped
        )

    def to_dict(self) -> dict[str, JSON]:
        return {
            "archived": self.archived,
            "deleted": self.deleted,
            "partitions_created": list(self.partitions_created),
            "partitions_dropped": list(self.partitions_dropped),
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


def event_filter(
    type: str | None,
    since: str | datetime | timedelta | None,
    until: str | datetime | timedelta | None,
    now: datetime,
) -> EventFilter:
    """Read a caller's filter; InvalidInput names ``type``, ``since`` or ``until``."""
    pattern = None if type is None else check_pattern(type, "type")
    start = None if since is None else instant_or_ago(since, now, "since")
    end = None if until is None else instant_or_ago(until, now, "until")
    if start is not None and end is not None and end <= start:
        raise InvalidInput("until", "must be later than since")
    return EventFilter(pattern, start, end)


def instant_or_ago(value: str | datetime | timedelta, now: datetime, field: str) -> datetime:
    """An instant (ISO 8601 with an offset, or an aware datetime), or a duration meaning that
    long before ``now`` (``PT1H``, ``P7D``, a timedelta); calendar parts count in UTC."""
    if isinstance(value, timedelta):
        return _ago(value, now, field)
    if isinstance(value, datetime):
        if not is_aware(value):
            raise InvalidInput(field, "must be timezone-aware")
        return value.astimezone(UTC)
    if not isinstance(value, str):
        raise InvalidInput(field, "must be an ISO 8601 instant or duration")
    text = value.strip()
    if text[:1].upper() == "P":
        duration = parse_duration(text, field)
        try:
            moved = add_months(now.astimezone(UTC), -duration.months)
            return moved - timedelta(days=duration.days) - duration.clock
        except (OverflowError, ValueError):
            raise InvalidInput(field, f"{value!r} reaches back before the year 1") from None
    if not text or len(text) > MAX_INSTANT_TEXT:
        raise InvalidInput(field, "give an ISO 8601 instant ('2025-03-15T13:00:00Z') or 'PT1H'")
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInput(
            field,
            f"{value!r} is neither an ISO 8601 instant ('2025-03-15T13:00:00Z') "
            "nor a duration ('PT1H': that long ago)",
        ) from None
    if not is_aware(parsed):
        raise InvalidInput(field, f"{value!r} has no UTC offset; add one, e.g. 'Z'")
    try:
        return parsed.astimezone(UTC)
    except OverflowError:
        raise InvalidInput(field, f"{value!r} is out of range") from None


def _ago(span: timedelta, now: datetime, field: str) -> datetime:
    if span < timedelta(0):
        raise InvalidInput(field, "must not be a negative duration")
    try:
        return now.astimezone(UTC) - span
    except OverflowError:
        raise InvalidInput(field, "reaches back before the year 1") from None


def month_start(instant: datetime) -> datetime:
    """The first instant (UTC) of ``instant``'s month: history partitions are UTC months."""
    utc = instant.astimezone(UTC)
    return datetime(utc.year, utc.month, 1, tzinfo=UTC)


def months_between(first: datetime, last: datetime) -> list[datetime]:
    """The starts of every UTC month from ``first``'s through ``last``'s."""
    months = []
    current = month_start(first)
    end = month_start(last)
    while current <= end:
        months.append(current)
        current = add_months(current, 1)
    return months


def encode_event_cursor(fired_at: datetime, timer_id: int) -> str:
    """An opaque cursor after the event ``(fired_at, id)``: the log is ordered by both."""
    text = f"event:{(fired_at - _EPOCH) // _MICROSECOND}:{timer_id}"
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode_event_cursor(cursor: str | None) -> tuple[datetime, int] | None:
    """``(fired_at, id)`` to list before (None: from the newest)."""
    if cursor is None or cursor == "":
        return None
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        prefix, micros, timer_id = base64.urlsafe_b64decode(padded.encode()).decode().split(":")
        if prefix != "event":
            raise ValueError(prefix)
        return _EPOCH + int(micros) * _MICROSECOND, int(timer_id)
    except (ValueError, UnicodeDecodeError, OverflowError) as exc:
        raise InvalidInput("cursor", "not a cursor this server issued") from exc
