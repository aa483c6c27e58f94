"""The records of stored schedules: what the store's schedules part takes and returns.

A :class:`~duetime.schedules.ScheduleRequest` resolves to a :class:`NewSchedule`; the store
keeps it as a :class:`~duetime.model.Schedule` and moves it on by :class:`ScheduleAdvance`
steps, each creating the occurrences' timers in the same transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from duetime.model import JSON, CatchUp, NewTimer, Schedule
from duetime.recurrence import Recurrence


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
    )
