"""A schedule's deadline: how long each occurrence has to succeed, and the verdict on one.

``must_succeed_within`` is a span after an occurrence's nominal instant: an occurrence not done
by then is *missed*, whatever kept it (it failed, is still running or retrying, was skipped by
the overlap policy, dropped by catch-up, or never made because no materialiser ran).
``pause_after_failures`` pauses a schedule after that many missed or dead occurrences in a row.
Pure: the verdict is read off what the store holds of the occurrence's timer.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime, timedelta

from duetime.errors import InvalidInput
from duetime.timemath.durations import parse_span
from duetime.timemath.recurrence.overlap import SKIPPED_BUFFER_FULL, SKIPPED_RUNNING

MIN_DEADLINE = timedelta(seconds=1)
MAX_DEADLINE = timedelta(days=366)
"""A year: a yearly schedule's occurrence may be given until the next one."""
MAX_PAUSE_AFTER = 1_000_000


class MissReason(enum.StrEnum):
    """Why an occurrence was not done by its deadline."""

    DEAD = "dead"
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    SKIPPED_OVERLAP = "skipped_overlap"
    STILL_RUNNING = "still_running"
    RETRYING = "retrying"
    NOT_STARTED = "not_started"
    """Made, but still waiting to run (e.g. buffered behind an earlier occurrence)."""
    LATE = "late"
    """Done, but after its deadline."""
    DROPPED_CATCH_UP = "dropped_catch_up"
    NOT_CREATED = "not_created"
    """No timer was ever made: no materialiser ran through its instant."""


def parse_deadline(value: object, field: str = "must_succeed_within") -> timedelta | None:
    """An ISO 8601 duration (``PT30M``), seconds or a timedelta, from 1 second to 366 days;
    None: no deadline."""
    if value is None:
        return None
    if type(value) is timedelta and MIN_DEADLINE <= value <= MAX_DEADLINE:
        return value  # every schedule read back: nothing to parse
    if isinstance(value, bool) or not isinstance(value, str | int | float | timedelta):
        raise InvalidInput(
            field, "must be an ISO 8601 duration such as 'PT30M' or a number of seconds"
        )
    if isinstance(value, int | float) and value < 0:
        raise InvalidInput(field, f"must not be negative, not {value!r}")
    if isinstance(value, timedelta) and value < timedelta(0):
        raise InvalidInput(field, "must not be negative")
    span = parse_span(value, field)
    if span < MIN_DEADLINE:
        raise InvalidInput(field, "must be at least 1 second (PT1S)")
    if span > MAX_DEADLINE:
        raise InvalidInput(field, f"must be at most {MAX_DEADLINE.days} days")
    return span


def parse_pause_after(value: object, field: str = "pause_after_failures") -> int | None:
    """A positive whole number of failed occurrences in a row; None: never pause."""
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(field, f"must be a positive whole number, not {value!r}")
    if not 1 <= value <= MAX_PAUSE_AFTER:
        raise InvalidInput(field, f"must be a whole number from 1 to {MAX_PAUSE_AFTER}")
    return value


@dataclass(frozen=True, slots=True)
class OccurrenceFacts:
    """What the store holds of one occurrence's timer (None: there is none)."""

    status: str | None
    completed_at: datetime | None = None
    last_error: str | None = None


class Verdict(enum.Enum):
    SUCCESS = "success"
    MISS = "miss"
    FAILURE = "failure"
    """Dead, on a schedule without a deadline: it counts towards a pause, recorded as no miss."""
    PASS = "pass"
    """Neither: skipped or dropped on a schedule without a deadline (counts for nothing)."""
    WAIT = "wait"
    """Not decided yet: without a deadline, an occurrence is judged once it has ended."""


def judge(
    facts: OccurrenceFacts,
    nominal_at: datetime,
    deadline: timedelta | None,
    after_at: datetime,
) -> tuple[Verdict, MissReason | None]:
    """The verdict on the occurrence due at ``nominal_at``, once its deadline has passed (or,
    without one, at any time); ``after_at`` is the instant through which the materialiser has
    handled the schedule's occurrences (made, or dropped by catch-up)."""
    reason = _reason(facts, nominal_at, after_at, deadline)
    if deadline is not None:
        return (Verdict.SUCCESS, None) if reason is None else (Verdict.MISS, reason)
    if reason is None:
        return Verdict.SUCCESS, None
    if reason in (MissReason.DEAD, MissReason.EXPIRED):
        return Verdict.FAILURE, reason
    if reason in (MissReason.CANCELLED, MissReason.SKIPPED_OVERLAP, MissReason.DROPPED_CATCH_UP):
        return Verdict.PASS, reason
    return Verdict.WAIT, reason


def _reason(
    facts: OccurrenceFacts, nominal_at: datetime, after_at: datetime, deadline: timedelta | None
) -> MissReason | None:
    status = facts.status
    if status is None:
        if nominal_at <= after_at:
            return MissReason.DROPPED_CATCH_UP
        return MissReason.NOT_CREATED
    if status == "done":
        late = (
            deadline is not None
            and facts.completed_at is not None
            and facts.completed_at > nominal_at + deadline
        )
        return MissReason.LATE if late else None
    if status == "cancelled":
        if facts.last_error in (SKIPPED_RUNNING, SKIPPED_BUFFER_FULL):
            return MissReason.SKIPPED_OVERLAP
        return MissReason.CANCELLED
    return _PENDING.get(status, MissReason.DEAD)


_PENDING = {
    "dead": MissReason.DEAD,
    "expired": MissReason.EXPIRED,
    "running": MissReason.STILL_RUNNING,
    "retrying": MissReason.RETRYING,
    "scheduled": MissReason.NOT_STARTED,
}
