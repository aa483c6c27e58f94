"""The event log's filters, read from what a caller gives: a ``type`` glob, ``since`` and
``until`` (an instant or a span ago), and the window of the activity chart.

The event log reads finished timers: an event is a timer that fired (``fired_at`` is its time),
and its deliveries are its attempts. The records these build, and how finished timers leave the
hot path (retention), are in :mod:`duetime.model.history`.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from duetime.bus.routes import check_pattern
from duetime.errors import InvalidInput
from duetime.model.history import ActivityCount, ActivityMinute, EventFilter
from duetime.timemath.durations import add_months, parse_duration
from duetime.timemath.tzmath import is_aware

MAX_INSTANT_TEXT = 64


def event_filter(
    type: str | None,
    since: str | datetime | timedelta | None,
    until: str | datetime | timedelta | None,
    now: datetime,
) -> EventFilter:
    """Read a caller's filter; InvalidInput names ``type``, ``since`` or ``until``.

    ``until`` at or before ``since`` is an empty window, and lists nothing: each bound is
    checked on its own, as a client that sends them (or a form that builds them) can."""
    pattern = None if type is None else check_pattern(type, "type")
    start = None if since is None else instant_or_ago(since, now, "since")
    end = None if until is None else instant_or_ago(until, now, "until")
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


MAX_ACTIVITY_MINUTES = 24 * 60


def activity_window(now: datetime, minutes: int) -> tuple[datetime, datetime]:
    """``[since, until)`` of the last ``minutes`` whole minutes, the current one included."""
    if isinstance(minutes, bool) or not isinstance(minutes, int):
        raise InvalidInput("minutes", "must be a whole number")
    if not 1 <= minutes <= MAX_ACTIVITY_MINUTES:
        raise InvalidInput("minutes", f"must be between 1 and {MAX_ACTIVITY_MINUTES}")
    start_of_minute = now.astimezone(UTC).replace(second=0, microsecond=0)
    until = start_of_minute + timedelta(minutes=1)
    return until - timedelta(minutes=minutes), until


def activity_series(
    counts: list[ActivityCount], since: datetime, minutes: int
) -> list[ActivityMinute]:
    """One :class:`ActivityMinute` per minute from ``since``, quiet minutes included."""
    by_minute: dict[int, list[ActivityCount]] = {}
    for count in counts:
        if 0 <= count.minute < minutes:
            by_minute.setdefault(count.minute, []).append(count)
    series = []
    for minute in range(minutes):
        start = since + timedelta(minutes=minute)
        found = by_minute.get(minute, [])
        fired = sum(c.count for c in found)
        if not fired:
            series.append(ActivityMinute(start))
            continue
        series.append(
            ActivityMinute(
                start,
                fired,
                {c.status: c.count for c in found},
                sum(c.lateness_sum_ms for c in found) / fired,
                max(c.lateness_max_ms for c in found),
            )
        )
    return series
