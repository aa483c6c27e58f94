"""The records of stored schedules: what the store's schedules part takes and returns.

A :class:`~duetime.schedules.ScheduleRequest` resolves to a :class:`NewSchedule`; the store
keeps it as a :class:`~duetime.model.Schedule` and moves it on by :class:`ScheduleAdvance`
steps, each creating the occurrences' timers in the same transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal, NamedTuple

from duetime.errors import AlreadyExists
from duetime.model import JSON, CatchUp, Schedule
from duetime.timemath.bounds import LATEST_AT
from duetime.timemath.recurrence import Recurrence
from duetime.timemath.recurrence.calendar import Calendar
from duetime.timemath.recurrence.overlap import (
    BUFFERED,
    DEFAULT_CATCH_UP_GRACE,
    SKIPPED_BUFFER_FULL,
    SKIPPED_RUNNING,
    Fate,
    OverlapPolicy,
    waiting,
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
    must_succeed_within: timedelta | None = None
    pause_after_failures: int | None = None
    window: timedelta | None = None
    """See :attr:`duetime.model.Schedule.window`."""


@dataclass(frozen=True, slots=True)
class ScheduleFilter:
    """Which schedules a listing returns; every field narrows it."""

    subject: str | None = None
    type: str | None = None
    active: bool | None = None


class DueSchedule(NamedTuple):
    """What planning a due schedule reads of its row: its rule and position, not its payload.

    The stores read due schedules in this shape (a tuple: cheap to make by the million); the
    occurrences' timers take type, payload, subject and max_attempts from the row in SQL.
    """

    id: int
    version: int
    name: str
    cron: str | None
    every: timedelta | None
    timezone: str
    start_at: datetime | None
    end_at: datetime | None
    on_gap: str
    on_overlap: str
    anchor_at: datetime
    catch_up: str
    catch_up_grace: timedelta
    overlap: str
    next_at: datetime | None
    after_at: datetime
    last_at: datetime | None
    calendar: Calendar | None
    run_window: timedelta | None = None
    """Its occurrences' run window (:attr:`duetime.model.Schedule.window`)."""


DUE_COLUMNS = DueSchedule._fields
"""The columns the stores' due-schedule queries return, in this order."""


class Occurrence(NamedTuple):
    """One occurrence to create: its timer's key and due instant. The rest of the timer (type,
    payload, subject, max_attempts, namespace) is the schedule's: the store copies it from the
    schedule's row in the statement that inserts the timer."""

    key: str
    due_at: datetime
    run_at: datetime | None = None
    """Within the schedule's run window (its hashed instant); None: at ``due_at``."""


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
    timers: tuple[Occurrence, ...] = ()
    fates: tuple[Fate, ...] = ()
    """What becomes of each of ``timers`` (empty: they all fire)."""
    overlap: str | None = None
    """The schedule's overlap policy when it is not ``allow``: kept on its timers, so the end
    of one releases the occurrence buffered behind it (the stores' release trigger)."""

    def occurrences(self) -> Iterator[tuple[Occurrence, Fate]]:
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


def occurrence_row(
    fate: Fate, due_at: datetime, overlap: str | None, run_at: datetime | None = None
) -> OccurrenceRow:
    """Fire: scheduled at its due instant (or ``run_at``, within its window). Buffer and wait:
    scheduled, parked until released (the end of the earlier occurrence decides a waiting one's
    fate). Skip: cancelled at once, with the reason."""
    if fate is Fate.FIRE:
        return OccurrenceRow("scheduled", run_at or due_at, None)
    if fate is Fate.BUFFER:
        return OccurrenceRow("scheduled", PARKED, BUFFERED)
    if fate is Fate.WAIT:
        return OccurrenceRow("scheduled", PARKED, waiting(overlap or "skip"))
    reason = SKIPPED_BUFFER_FULL if overlap == "buffer_one" else SKIPPED_RUNNING
    return OccurrenceRow("cancelled", due_at, reason)


OccurrenceValues = tuple[int, str, datetime, str, datetime, str | None, str | None]
"""(schedule_id, key, due_at, status, run_at, error, overlap) of one timer to insert."""


def occurrence_values(
    advances: Iterable[ScheduleAdvance], advanced: set[int]
) -> list[OccurrenceValues]:
    """The timers the ``advanced`` of ``advances`` create, as the stores insert them."""
    rows: list[OccurrenceValues] = []
    for a in advances:
        if a.schedule_id not in advanced or not a.timers:
            continue
        if not a.fates:  # all simply fire: the common case, kept cheap
            rows.extend(
                (a.schedule_id, key, due_at, "scheduled", run_at or due_at, None, None)
                for key, due_at, run_at in a.timers
            )
            continue
        for (key, due_at, run_at), fate in zip(a.timers, a.fates, strict=True):
            row = occurrence_row(fate, due_at, a.overlap, run_at)
            rows.append((a.schedule_id, key, due_at, row.status, row.run_at, row.error, a.overlap))
    return rows


def stranded(
    states: Mapping[int, OccurrenceState],
) -> tuple[list[int], dict[int, OccurrenceState]]:
    """The schedules whose buffered occurrence has nothing unfinished before it, and the states
    once it is released (unfinished, nothing buffered).

    The release trigger frees a buffered occurrence when an earlier one of a ``buffer_one``
    schedule ends; one made before the schedule had that policy carries none, so its end
    releases nothing. The materialiser then releases it, at the schedule's next occurrence.
    """
    stuck = [id for id, state in states.items() if state.buffered and not state.unfinished]
    released = OccurrenceState(unfinished=True, buffered=False)
    return stuck, {**states, **dict.fromkeys(stuck, released)}


def next_wake(
    next_at: datetime | None, gated_at: datetime | None, ahead: timedelta
) -> datetime | None:
    """When the materialiser next has work: ``ahead`` of the next occurrence of a schedule,
    with an overlap policy (``gated_at``) or without (``next_at``): both are made ahead."""
    known = [instant - ahead for instant in (next_at, gated_at) if instant]
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
        calendar=rule.calendar,
        must_succeed_within=new.must_succeed_within,
        pause_after_failures=new.pause_after_failures,
        window=new.window,
    )


def stored_schedules(
    schedules: Sequence[NewSchedule],
    ids: dict[str, int],
    on_conflict: Literal["error", "keep", "update"],
    now: datetime,
) -> list[Schedule | None]:
    """What a batch insert returns: each schedule as stored (``ids``: the rows it made, by
    name), or None where its name was taken (of a name given twice, the first is stored);
    ``error`` refuses the batch instead."""
    stored: list[Schedule | None] = []
    for new in schedules:
        id = ids.pop(new.name, None)
        if id is None and on_conflict == "error":
            raise AlreadyExists(f"a schedule named {new.name!r} already exists", field="name")
        stored.append(None if id is None else schedule_from_new(new, id, now))
    return stored
