"""PostgreSQL rows of schedules: a stored schedule from its row, and the parameters a schedule
is written with (PostgreSQL's text refuses NUL: refused here, naming the field, before anything
is sent)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, cast

from psycopg import AsyncCursor
from psycopg.types.json import Jsonb

from duetime.errors import InvalidInput
from duetime.model import CatchUp, Schedule
from duetime.model.schedules import (
    DUE_COLUMNS,
    DueSchedule,
    NewSchedule,
    OccurrenceValues,
    ScheduleAdvance,
)
from duetime.store.cursors import encode_name_cursor
from duetime.store.postgres.rows import Row
from duetime.support.sealing import Sealing
from duetime.timemath.recurrence.calendar import Calendar, calendar_of, calendar_text

_CALENDAR_AT = DUE_COLUMNS.index("calendar")


def due_row(cursor: AsyncCursor[DueSchedule]) -> Callable[[Sequence[Any]], DueSchedule]:
    """Rows of lock_due_schedules as :class:`DueSchedule` (its columns, in its order)."""
    names = tuple(column.name for column in cursor.description or ())
    if names != DUE_COLUMNS:  # pragma: no cover - schedules.sql and the model disagree
        raise RuntimeError(f"lock_due_schedules returns {names}, not {DUE_COLUMNS}")

    def due(values: Sequence[Any]) -> DueSchedule:
        calendar = values[_CALENDAR_AT]
        if calendar is None:
            return DueSchedule._make(values)
        return DueSchedule._make(
            (*values[:_CALENDAR_AT], Calendar.from_text(calendar), *values[_CALENDAR_AT + 1 :])
        )

    return due


_NEW_COLUMNS = {
    "namespaces": "namespace",
    "names": "name",
    "types": "type",
    "subjects": "subject",
    "catch_ups": "catch_up",
    "actives": "active",
    "max_attempts": "max_attempts",
    "next_ats": "next_at",
    "after_ats": "after_at",
    "anchor_ats": "anchor_at",
    "overlaps": "overlap",
    "catch_up_graces": "catch_up_grace",
    "must_succeed_withins": "must_succeed_within",
    "pause_after_failures": "pause_after_failures",
    "run_windows": "window",
}
"""insert_schedules' arrays read from each :class:`NewSchedule` as it is, by attribute."""
_RULE_COLUMNS = {
    "crons": "cron",
    "everys": "every",
    "timezones": "timezone",
    "start_ats": "start_at",
    "end_ats": "end_at",
    "on_gaps": "on_gap",
    "on_overlaps": "on_overlap",
}
"""insert_schedules' arrays read from each schedule's recurrence as it is, by attribute."""


def new_batch_params(schedules: Sequence[NewSchedule], now: datetime, sealing: Sealing) -> Row:
    """insert_schedules' arrays: one column of the batch each, read from each schedule and
    its recurrence (no Schedule made for each of a batch)."""
    rules = [new.recurrence for new in schedules]
    for new, rule in zip(schedules, rules, strict=True):
        refuse_nul(type=new.type, subject=new.subject, timezone=rule.timezone, cron=rule.cron)
    params: Row = {
        column: [getattr(new, name) for new in schedules] for column, name in _NEW_COLUMNS.items()
    }
    params |= {column: [getattr(r, name) for r in rules] for column, name in _RULE_COLUMNS.items()}
    params["payloads"] = [sealing.seal_json(new.namespace, new.payload) for new in schedules]
    params["calendars"] = [calendar_text(rule.calendar) for rule in rules]
    params["now"] = now
    return params


OCCURRENCE_COLUMNS = (
    "schedule_ids",
    "keys",
    "due_ats",
    "statuses",
    "run_ats",
    "errors",
    "overlaps",
)
"""The arrays of the timers an advance makes, one a field of :data:`OccurrenceValues`."""
FIRING = 3
"""The columns from here on are empty when every occurrence simply fires at its due instant (no
run window): unnest pads them with NULLs."""


def advance_params(
    advances: Sequence[ScheduleAdvance], made: Sequence[OccurrenceValues], now: datetime
) -> Row:
    """advance_fresh's and advance_schedules' arrays: the rows advanced, the timers made."""
    plain = all(
        status == "scheduled" and overlap is None and run_at == due_at
        for _, _, due_at, status, run_at, _, overlap in made
    )
    params: Row = {
        "ids": [a.schedule_id for a in advances],
        "versions": [a.version for a in advances],
        "next_ats": [a.next_at for a in advances],
        "after_ats": [a.after_at for a in advances],
        "last_ats": [a.last_at for a in advances],
        "now": now,
    }
    for i, column in enumerate(OCCURRENCE_COLUMNS):
        params[column] = [] if plain and i >= FIRING else [row[i] for row in made]
    return params


def refuse_nul(**fields: str | None) -> None:
    """PostgreSQL's text cannot hold NUL: refused naming the field, before anything is sent."""
    for field, value in fields.items():
        if value is not None and "\x00" in value:
            raise InvalidInput(field, "must not contain NUL characters")


def definition_params(schedule: Schedule, sealing: Sealing) -> Row:
    """A stored schedule's columns, its payload sealed where its namespace is (the timers it
    makes copy it sealed)."""
    refuse_nul(
        type=schedule.type,
        subject=schedule.subject,
        timezone=schedule.timezone,
        cron=schedule.cron,
    )
    return {
        "type": schedule.type,
        "payload": Jsonb(sealing.seal_json(schedule.namespace, schedule.payload), dumps=_as_is),
        "subject": schedule.subject,
        "cron": schedule.cron,
        "every": schedule.every,
        "timezone": schedule.timezone,
        "start_at": schedule.start_at,
        "end_at": schedule.end_at,
        "catch_up": schedule.catch_up,
        "on_gap": schedule.on_gap,
        "on_overlap": schedule.on_overlap,
        "active": schedule.active,
        "max_attempts": schedule.max_attempts,
        "next_at": schedule.next_at,
        "after_at": schedule.after_at,
        "anchor_at": schedule.anchor_at,
        "overlap": schedule.overlap,
        "catch_up_grace": schedule.catch_up_grace,
        "calendar": calendar_text(schedule.calendar),
        "must_succeed_within": schedule.must_succeed_within,
        "pause_after_failures": schedule.pause_after_failures,
        "watched_from": schedule.watched_from,
        "run_window": schedule.window,
    }


def _as_is(text: str) -> str:
    return text


def schedule_from_row(row: Row, sealing: Sealing) -> Schedule:
    return Schedule(
        id=row["id"],
        namespace=row["namespace"],
        name=row["name"],
        type=row["type"],
        payload=sealing.open_payload(row["payload"]),
        subject=row["subject"],
        cron=row["cron"],
        every=row["every"],
        timezone=row["timezone"],
        start_at=row["start_at"],
        end_at=row["end_at"],
        catch_up=cast(CatchUp, row["catch_up"]),
        on_gap=row["on_gap"],
        on_overlap=row["on_overlap"],
        active=row["active"],
        max_attempts=row["max_attempts"],
        next_at=row["next_at"],
        after_at=row["after_at"],
        anchor_at=row["anchor_at"],
        last_at=row["last_at"],
        calendar=calendar_of(row["calendar"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        version=row["version"],
        overlap=row["overlap"],
        catch_up_grace=row["catch_up_grace"],
        must_succeed_within=row["must_succeed_within"],
        pause_after_failures=row["pause_after_failures"],
        watched_from=row["watched_from"],
        window=row["run_window"],
    )


def name_cursor(schedule: Schedule) -> str:
    return encode_name_cursor(schedule.name)
