"""The records of stored schedules: what the store's schedules part takes and returns.

A :class:`~duetime.schedules.ScheduleRequest` resolves to a :class:`NewSchedule`; the store
keeps it as a :class:`~duetime.model.Schedule` and moves it on by :class:`ScheduleAdvance`
steps, each creating the occurrences' timers in the same transaction.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from duetime.bounds import LATEST_AT
from duetime.model import JSON, CatchUp, NewTimer, Schedule
from duetime.recurrence import Recurrence
from duetime.recurrence.overlap import (
    BUFFERED,
    DEFAULT_CATCH_UP_GRACE,
    SKIPPED_BUFFER_FULL,
    SKIPPED_RUNNING,
    Fate,
    OverlapPolicy,
)


@dataclass(frozen=True, slots=True)
class NewSchedule:
    """A validated schedule to store; the store fills in id, version and bookkeeping."""

    namespace: str
    name: str
    type: str
    payload: JSON
    subject: str | None
    recurrence: Recurrence
    catch_up: CatchUp
    active: bool
    max_attempts: int
    anchor_at: datetime
    after_at: datetime
    next_at: datetime | None
    overlap: OverlapPolicy = "allow"
    catch_up_grace: timedelta = DEFAULT_CATCH_UP_GRACE


@dataclass(frozen=True, slots=True)
class ScheduleFilter:
    """Which schedules a listing returns; every field narrows it."""

    subject: str | None = None
    type: str | None = None
    active: bool | None = None


@dataclass(frozen=True, slots=True)
class ScheduleAdvance:
    """One materialisation step of one schedule: the timers to create and its new position.

    The store applies it only if the row still has ``version`` (optimistic concurrency): a
    schedule someone else advanced or changed meanwhile is skipped, its timers not inserted.
    """

    schedule_id: int
    version: int
    next_at: datetime | None
    after_at: datetime
    last_at: datetime | None
    timers: tuple[NewTimer, ...] = ()
    fates: tuple[Fate, ...] = ()
    """What becomes of each of ``timers`` (empty: they all fire)."""
    overlap: str | None = None
    """The schedule's overlap policy when it is not ``allow``: kept on its timers, so the end
    of one releases the occurrence buffered behind it (the stores' release trigger)."""

    def occurrences(self) -> Iterator[tuple[NewTimer, Fate]]:
        """Each timer with its fate."""
        fates = self.fates or (Fate.FIRE,) * len(self.timers)
        return zip(self.timers, fates, strict=True)


PARKED = LATEST_AT
"""The run_at of a buffered occurrence: past every instant duetime accepts, so nothing claims
it until the end of the earlier occurrence releases it (the stores' release trigger, which
names the same instant: 9000-01-01T00:00Z)."""


@dataclass(frozen=True, slots=True)
class OccurrenceRow:
    """How the stores write one occurrence of a given fate."""

    status: str
    run_at: datetime
    error: str | None


def occurrence_row(fate: Fate, due_at: datetime, overlap: str | None) -> OccurrenceRow:
    """Fire: scheduled at its due instant. Buffer: scheduled, parked until released. Skip:
    cancelled at once, with the reason."""
    if fate is Fate.FIRE:
        return OccurrenceRow("scheduled", due_at, None)
    if fate is Fate.BUFFER:
        return OccurrenceRow("scheduled", PARKED, BUFFERED)
    reason = SKIPPED_BUFFER_FULL if overlap == "buffer_one" else SKIPPED_RUNNING
    return OccurrenceRow("cancelled", due_at, reason)


def next_wake(
    next_at: datetime | None, gated_at: datetime | None, ahead: timedelta
) -> datetime | None:
    """When the materialiser next has work: ``ahead`` of the next occurrence of a schedule
    without an overlap policy, or at the next of one with a policy (made when due)."""
    known = [instant for instant in (next_at and next_at - ahead, gated_at) if instant]
    return min(known, default=None)


@dataclass(frozen=True, slots=True)
class OccurrenceState:
    """Whether a schedule has an unfinished occurrence, and one buffered behind it."""

    unfinished: bool = False
    buffered: bool = False


@dataclass(frozen=True, slots=True)
class Materialized:
    """What one materialisation batch did."""

    due: int = 0
    """Schedules read as due."""
    advanced: int = 0
    timers: int = 0
    """Timers created (an occurrence that already had its timer is not counted)."""


def schedule_from_new(new: NewSchedule, id: int, now: datetime, version: int = 1) -> Schedule:
    """The stored row of a new schedule (what the stores return)."""
    rule = new.recurrence
    return Schedule(
        id=id,
        namespace=new.namespace,
        name=new.name,
        type=new.type,
        payload=new.payload,
        subject=new.subject,
        cron=rule.cron,
        every=rule.every,
        timezone=rule.timezone,
        start_at=rule.start_at,
        end_at=rule.end_at,
        catch_up=new.catch_up,
        on_gap=rule.on_gap,
        on_overlap=rule.on_overlap,
        active=new.active,
        max_attempts=new.max_attempts,
        next_at=new.next_at,
        after_at=new.after_at,
        anchor_at=new.anchor_at,
        last_at=None,
        created_at=now,
        updated_at=now,
        version=version,
        overlap=new.overlap,
        catch_up_grace=new.catch_up_grace,
    )
