"""SQLite rows of schedules: a stored schedule from its row, a due one from its columns, and
the parameters a schedule is written with (instants and spans as integer microseconds)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, cast

from duetime.model import CatchUp, Schedule
from duetime.model.schedules import DueSchedule, NewSchedule
from duetime.store.codec import from_micros, maybe_from_micros, to_micros
from duetime.store.cursors import encode_name_cursor
from duetime.support.sealing import Sealing
from duetime.timemath.recurrence.calendar import Calendar, calendar_of, calendar_text


def due_rows(rows: Sequence[tuple[Any, ...]]) -> list[DueSchedule]:
    """Rows of due_rows as :class:`DueSchedule`; an instant or span shared by many rows (most
    of a batch: same rule, same next occurrence) is converted once."""
    instants: dict[int | None, datetime | None] = {None: None}
    spans: dict[int | None, timedelta | None] = {None: None}

    def instant(micros: int | None) -> datetime | None:
        try:
            return instants[micros]
        except KeyError:
            found = instants[micros] = maybe_from_micros(micros)
            return found

    def span(micros: int | None) -> timedelta | None:
        try:
            return spans[micros]
        except KeyError:
            found = spans[micros] = None if micros is None else timedelta(microseconds=micros)
            return found

    return [
        DueSchedule(
            id,
            version,
            name,
            cron,
            span(every),
            timezone,
            instant(start_at),
            instant(end_at),
            on_gap,
            on_overlap,
            cast(datetime, instant(anchor_at)),
            catch_up,
            cast(timedelta, span(grace)),
            overlap,
            instant(next_at),
            cast(datetime, instant(after_at)),
            instant(last_at),
            None if calendar is None else Calendar.from_text(calendar),
            span(run_window),
        )
        for (
            id,
            version,
            name,
            cron,
            every,
            timezone,
            start_at,
            end_at,
            on_gap,
            on_overlap,
            anchor_at,
            catch_up,
            grace,
            overlap,
            next_at,
            after_at,
            last_at,
            calendar,
            run_window,
        ) in rows
    ]


def new_params(schedule: NewSchedule, now: datetime, sealing: Sealing) -> dict[str, Any]:
    params = definition_params(schedule, sealing)
    params.update(namespace=schedule.namespace, name=schedule.name, now=to_micros(now))
    return params


def saved_params(schedule: Schedule, now: datetime, sealing: Sealing) -> dict[str, Any]:
    params = definition_params(schedule, sealing)
    params.update(id=schedule.id, version=schedule.version, now=to_micros(now))
    return params


def definition_params(schedule: Schedule | NewSchedule, sealing: Sealing) -> dict[str, Any]:
    """A stored schedule's columns, or a new one's (its rule read from its recurrence: no
    Schedule made for each of a batch); its payload sealed where its namespace is, so the
    timers it makes copy it sealed."""
    rule = schedule.recurrence if isinstance(schedule, NewSchedule) else schedule
    return {
        "type": schedule.type,
        "payload": sealing.seal_json(schedule.namespace, schedule.payload),
        "subject": schedule.subject,
        "cron": rule.cron,
        "every": None if rule.every is None else span_micros(rule.every),
        "timezone": rule.timezone,
        "start_at": None if rule.start_at is None else to_micros(rule.start_at),
        "end_at": None if rule.end_at is None else to_micros(rule.end_at),
        "catch_up": schedule.catch_up,
        "on_gap": rule.on_gap,
        "on_overlap": rule.on_overlap,
        "active": int(schedule.active),
        "max_attempts": schedule.max_attempts,
        "next_at": None if schedule.next_at is None else to_micros(schedule.next_at),
        "after_at": to_micros(schedule.after_at),
        "anchor_at": to_micros(schedule.anchor_at),
        "overlap": schedule.overlap,
        "catch_up_grace": span_micros(schedule.catch_up_grace),
        "calendar": calendar_text(rule.calendar),
        "run_window": None if schedule.window is None else span_micros(schedule.window),
        **deadline_params(schedule),
    }


def deadline_params(schedule: Schedule | NewSchedule) -> dict[str, Any]:
    """The deadline's columns (a new schedule is watched from its creation: NULL)."""
    within = schedule.must_succeed_within
    watched = schedule.watched_from if isinstance(schedule, Schedule) else None
    return {
        "must_succeed_within": None if within is None else span_micros(within),
        "pause_after_failures": schedule.pause_after_failures,
        "watched_from": None if watched is None else to_micros(watched),
    }


def span_micros(span: timedelta) -> int:
    return (span.days * 86_400 + span.seconds) * 1_000_000 + span.microseconds


def schedule_from_row(row: sqlite3.Row, sealing: Sealing) -> Schedule:
    every = row["every"]
    return Schedule(
        id=row["id"],
        namespace=row["namespace"],
        name=row["name"],
        type=row["type"],
        payload=sealing.read_payload(row["payload"]),
        subject=row["subject"],
        cron=row["cron"],
        every=None if every is None else timedelta(microseconds=every),
        timezone=row["timezone"],
        start_at=maybe_from_micros(row["start_at"]),
        end_at=maybe_from_micros(row["end_at"]),
        catch_up=cast(CatchUp, row["catch_up"]),
        on_gap=row["on_gap"],
        on_overlap=row["on_overlap"],
        active=bool(row["active"]),
        max_attempts=row["max_attempts"],
        next_at=maybe_from_micros(row["next_at"]),
        after_at=from_micros(row["after_at"]),
        anchor_at=from_micros(row["anchor_at"]),
        last_at=maybe_from_micros(row["last_at"]),
        calendar=calendar_of(row["calendar"]),
        created_at=from_micros(row["created_at"]),
        updated_at=from_micros(row["updated_at"]),
        version=row["version"],
        overlap=row["overlap"],
        catch_up_grace=timedelta(microseconds=row["catch_up_grace"]),
        must_succeed_within=maybe_span(row["must_succeed_within"]),
        pause_after_failures=row["pause_after_failures"],
        watched_from=maybe_from_micros(row["watched_from"]),
        window=None if row["run_window"] is None else timedelta(microseconds=row["run_window"]),
    )


def maybe_span(micros: int | None) -> timedelta | None:
    return None if micros is None else timedelta(microseconds=micros)


def name_cursor(schedule: Schedule) -> str:
    return encode_name_cursor(schedule.name)
