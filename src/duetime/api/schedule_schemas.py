"""The documented shapes of the schedule endpoints' answers (for /openapi.json).

Their bodies are described once, in :mod:`duetime.schedule_bodies`, which reads them too; the
query parameters of a preview take the time math's names.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from duetime.timemath.recurrence.business import Roll as RollName
from duetime.timemath.recurrence.calendar import Feb29 as Feb29Name
from duetime.timemath.recurrence.cron import OnGap as OnGapName
from duetime.timemath.recurrence.cron import OnOverlap as OnOverlapName

__all__ = ["Feb29Name", "OnGapName", "OnOverlapName", "RollName"]


class ScheduleOut(BaseModel):
    id: int
    namespace: str
    name: str
    type: str
    payload: Any
    subject: str | None
    cron: str | None
    every: float | None = Field(description="Seconds")
    timezone: str
    start_at: str | None
    end_at: str | None
    catch_up: str
    catch_up_grace: float = Field(description="Seconds")
    overlap: str
    on_gap: str
    on_overlap: str
    active: bool
    max_attempts: int
    next_at: str | None
    last_at: str | None
    after_at: str
    anchor_at: str
    created_at: str
    updated_at: str
    version: int
    rrule: str | None
    dtstart: str | None
    exdates: list[str] | None
    rdates: list[str] | None
    holidays: str | None
    holiday_dates: list[str] | None
    weekend: list[str] | None
    roll: str | None
    feb29: str | None


class OccurrenceOut(BaseModel):
    utc: str = Field(examples=["2025-03-09T07:00:00Z"])
    local: str = Field(examples=["2025-03-09T03:00:00-04:00"], description="With its offset")


class SchedulePutOut(BaseModel):
    """What defining did: ``created`` (201), or ``updated`` / ``kept`` (200)."""

    action: Literal["created", "updated", "kept"]
    schedule: ScheduleOut


class ScheduleChangedOut(BaseModel):
    action: Literal["updated", "kept", "paused", "resumed"]
    schedule: ScheduleOut


class ScheduleDeletedOut(BaseModel):
    action: Literal["deleted"]
    schedule: ScheduleOut
    cancelled: int = Field(description="Pending occurrences cancelled with it")


class SchedulePageOut(BaseModel):
    """By name; pass ``next_cursor`` as ``cursor`` for the next page (null at the end)."""

    items: list[ScheduleOut]
    next_cursor: str | None


class ScheduleDetailOut(BaseModel):
    schedule: ScheduleOut
    description: str = Field(examples=["At 09:00 (Asia/Tokyo)"])
    next: list[OccurrenceOut] = Field(description="The next occurrences (none while paused)")


class PreviewOut(BaseModel):
    timezone: str
    description: str
    occurrences: list[OccurrenceOut]
