"""Schedules in PostgreSQL: the :class:`~duetime.store.parts.ScheduleStore` part of
:class:`~duetime.store.postgres.store.PostgresStore`.

Materialising locks the due rows with ``FOR UPDATE SKIP LOCKED``, so several workers share the
due schedules instead of all planning the same ones; the version check and the unique timer key
keep it exactly-once even without the lock.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TypeVar, cast

import psycopg
from psycopg.types.json import Jsonb

from duetime.errors import AlreadyExists, InvalidInput
from duetime.model import CatchUp, OnConflict, Page, Schedule, Timer
from duetime.model.schedules import (
    PARKED,
    Materialized,
    NewSchedule,
    OccurrenceState,
    ScheduleAdvance,
    ScheduleFilter,
    next_wake,
    occurrence_row,
    schedule_from_new,
)
from duetime.recurrence.overlap import gated
from duetime.store.codec import dump_json
from duetime.store.cursors import decode_name_cursor, encode_name_cursor, page
from duetime.store.parts import SchedulePlan
from duetime.store.postgres.database import Conn, Database, Work, fetch_all, fetch_value
from duetime.store.postgres.notices import Notices
from duetime.store.postgres.rows import Row, timer_from_row
from duetime.store.queries import load_queries

Q = load_queries("duetime.store.postgres", "schedules.sql")
R = TypeVar("R")


class PostgresSchedules:
    """Schedule storage in one PostgreSQL schema (its pool, its notifications)."""

    def __init__(self, db: Database, notices: Notices) -> None:
        self._db = db
        self._notices = notices

    async def put_schedules(
        self, schedules: Sequence[NewSchedule], on_conflict: OnConflict, now: datetime
    ) -> list[Schedule | None]:
        if not schedules:
            return []
        rows = [_new_params(schedule, now) for schedule in schedules]

        async def run(conn: Conn) -> list[Schedule | None]:
            stored: list[Schedule | None] = []
            async with conn.cursor() as cur:
                await cur.executemany(Q["insert_schedule"], rows, returning=True)
                for _ in rows:
                    row = await cur.fetchone()
                    if row is None and on_conflict == "error":
                        raise _exists(rows[len(stored)]["name"])
                    stored.append(None if row is None else schedule_from_row(row))
                    cur.nextset()
            await self._notices.notify_earliest(
                conn, [s.next_at for s in stored if s is not None and s.active]
            )
            return stored

        stored = await self._write(run)
        self._notices.here_earliest([s.next_at for s in stored if s is not None and s.active])
        return stored

    async def get_schedule(self, namespace: str, name: str) -> Schedule | None:
        params = {"namespace": namespace, "name": name}

        async def run(conn: Conn) -> Schedule | None:
            rows = await fetch_all(conn, Q["get_schedule"], params)
            return schedule_from_row(rows[0]) if rows else None

        return await self._db.read(run)

    async def list_schedules(
        self, namespace: str, filter: ScheduleFilter, cursor: str | None, limit: int
    ) -> Page[Schedule]:
        params = {
            "namespace": namespace,
            "subject": filter.subject,
            "type": filter.type,
            "active": filter.active,
            "after_name": decode_name_cursor(cursor),
            "limit": limit + 1,
        }

        async def run(conn: Conn) -> Page[Schedule]:
            rows = await fetch_all(conn, Q["list_schedules"], params)
            return page(rows, limit, schedule_from_row, _name_cursor)

        return await self._db.read(run)

    async def save_schedule(
        self, schedule: Schedule, now: datetime, release_after: datetime | None
    ) -> Schedule | None:
        params = _definition_params(schedule)
        params.update(id=schedule.id, version=schedule.version, now=now)

        async def run(conn: Conn) -> Schedule | None:
            rows = await fetch_all(conn, Q["save_schedule"], params)
            if not rows:
                return None
            if release_after is not None:
                release = {"schedule_id": schedule.id, "after": release_after}
                await conn.execute(Q["release_occurrences"], release)
            saved = schedule_from_row(rows[0])
            if saved.active:
                await self._notices.notify_earliest(conn, [saved.next_at])
            return saved

        saved = await self._write(run)
        if saved is not None and saved.active:
            self._notices.here_earliest([saved.next_at])
        return saved

    async def delete_schedule(
        self, namespace: str, name: str, now: datetime
    ) -> tuple[Schedule, int] | None:
        params = {"namespace": namespace, "name": name}

        async def run(conn: Conn) -> tuple[Schedule, int] | None:
            rows = await fetch_all(conn, Q["delete_schedule"], params)
            if not rows:
                return None
            schedule = schedule_from_row(rows[0])
            cancel = {"schedule_id": schedule.id, "now": now}
            cancelled = (await conn.execute(Q["cancel_occurrences"], cancel)).rowcount
            return schedule, cancelled

        return await self._write(run)

    async def due_schedules(
        self, namespace: str, horizon: datetime, limit: int, now: datetime | None = None
    ) -> list[Schedule]:
        params = {
            "namespace": namespace,
            "horizon": horizon,
            "limit": limit,
            "now": horizon if now is None else now,
        }

        async def run(conn: Conn) -> list[Schedule]:
            return [schedule_from_row(r) for r in await fetch_all(conn, Q["due_schedules"], params)]

        return await self._db.read(run)

    async def advance_schedules(
        self, advances: Sequence[ScheduleAdvance], now: datetime
    ) -> list[int]:
        earliest: list[datetime] = []

        async def run(conn: Conn) -> list[int]:
            advanced, created = await _advance(conn, advances, now)
            earliest[:] = _runnable(created)
            await self._notices.notify_earliest(conn, earliest)
            return advanced

        advanced = await self._write(run)
        self._notices.here_earliest(earliest)
        return advanced

    async def materialize(
        self, namespace: str, horizon: datetime, limit: int, plan: SchedulePlan, now: datetime
    ) -> Materialized:
        params = {"namespace": namespace, "horizon": horizon, "limit": limit, "now": now}
        earliest: list[datetime] = []

        async def run(conn: Conn) -> Materialized:
            due = [
                schedule_from_row(r) for r in await fetch_all(conn, Q["lock_due_schedules"], params)
            ]
            if not due:
                return Materialized()
            advances = plan(due, await _states(conn, due))
            advanced, created = await _advance(conn, advances, now)
            earliest[:] = _runnable(created)
            await self._notices.notify_earliest(conn, earliest)
            return Materialized(len(due), len(advanced), len(created))

        result = await self._write(run)
        self._notices.here_earliest(earliest)
        return result

    async def next_schedule_at(
        self, namespace: str, ahead: timedelta = timedelta(0)
    ) -> datetime | None:
        async def run(conn: Conn) -> datetime | None:
            (row,) = await fetch_all(conn, Q["next_schedule_at"], {"namespace": namespace})
            return next_wake(row["next_at"], row["gated_at"], ahead)

        return await self._db.read(run)

    async def schedules_after(self, after_id: int, limit: int) -> list[Schedule]:
        params = {"after_id": after_id, "limit": limit}

        async def run(conn: Conn) -> list[Schedule]:
            rows = await fetch_all(conn, Q["schedules_after"], params)
            return [schedule_from_row(row) for row in rows]

        return await self._db.read(run)

    async def pending_local_timers(self, after_id: int, limit: int) -> list[Timer]:
        params = {"after_id": after_id, "limit": limit}

        async def run(conn: Conn) -> list[Timer]:
            rows = await fetch_all(conn, Q["pending_local_timers"], params)
            return [timer_from_row(row) for row in rows]

        return await self._db.read(run)

    async def reresolve_timers(
        self, changes: Sequence[tuple[int, datetime, datetime]], now: datetime
    ) -> int:
        if not changes:
            return 0
        params = {
            "ids": [id for id, _, _ in changes],
            "old_due_ats": [old for _, old, _ in changes],
            "new_due_ats": [new for _, _, new in changes],
            "now": now,
        }
        earliest = min(new for _, _, new in changes)

        async def run(conn: Conn) -> int:
            moved = (await conn.execute(Q["reresolve_timers"], params)).rowcount
            if moved:
                await self._notices.notify(conn, earliest)
            return moved

        moved = await self._write(run)
        if moved:
            self._notices.here(earliest)
        return moved

    async def get_meta(self, key: str) -> str | None:
        async def run(conn: Conn) -> str | None:
            value = await fetch_value(conn, Q["get_meta"], {"key": key})
            return None if value is None else str(value)

        return await self._db.read(run)

    async def set_meta(self, key: str, value: str, now: datetime) -> None:
        params = {"key": key, "value": value, "now": now}

        async def run(conn: Conn) -> None:
            await conn.execute(Q["set_meta"], params)

        await self._db.read(run)

    # -- plumbing ---------------------------------------------------------------------------
    async def _write(self, work: Work[R]) -> R:
        try:
            return await self._db.write(work)
        except psycopg.DataError as exc:  # e.g. "\u0000" in a JSON string: jsonb refuses it
            raise InvalidInput("payload", f"PostgreSQL cannot store it: {exc}") from exc


async def _states(conn: Conn, due: Sequence[Schedule]) -> dict[int, OccurrenceState]:
    """The occurrence states of the due schedules with an overlap policy (none: no query)."""
    ids = [schedule.id for schedule in due if gated(schedule.overlap)]
    if not ids:
        return {}
    rows = await fetch_all(conn, Q["occurrence_states"], {"schedule_ids": ids})
    return {r["schedule_id"]: OccurrenceState(r["unfinished"], r["buffered"]) for r in rows}


def _runnable(created: Sequence[tuple[datetime, str]]) -> list[datetime]:
    """The run_ats of the created occurrences that will run (not skipped, not buffered)."""
    return [run_at for run_at, status in created if status == "scheduled" and run_at < PARKED]


async def _advance(
    conn: Conn, advances: Sequence[ScheduleAdvance], now: datetime
) -> tuple[list[int], list[tuple[datetime, str]]]:
    """Advance the rows whose version matches, then insert only their timers ((run_at, status)
    of each created)."""
    if not advances:
        return [], []
    params = {
        "ids": [a.schedule_id for a in advances],
        "versions": [a.version for a in advances],
        "next_ats": [a.next_at for a in advances],
        "after_ats": [a.after_at for a in advances],
        "last_ats": [a.last_at for a in advances],
    }
    advanced = [row["id"] for row in await fetch_all(conn, Q["advance_schedules"], params)]
    ok = set(advanced)
    timers = [(a.schedule_id, t) for a in advances if a.schedule_id in ok for t in a.timers]
    if not timers:
        return advanced, []
    rows = {
        "namespaces": [t.namespace for _, t in timers],
        "keys": [t.key for _, t in timers],
        "types": [t.type for _, t in timers],
        "payloads": [dump_json(t.payload) for _, t in timers],
        "subjects": [t.subject for _, t in timers],
        "due_ats": [t.due_at for _, t in timers],
        "max_attempts": [t.max_attempts for _, t in timers],
        "schedule_ids": [schedule_id for schedule_id, _ in timers],
        **_fate_columns(advances, ok),
        "now": now,
    }
    cur = await conn.execute(Q["insert_occurrences"], rows)
    return advanced, [(row["run_at"], row["status"]) for row in await cur.fetchall()]


def _fate_columns(advances: Sequence[ScheduleAdvance], ok: set[int]) -> Row:
    """Status, run_at, reason and overlap of each timer: empty arrays when all simply fire."""
    if not any(a.overlap is not None for a in advances if a.schedule_id in ok):
        return {"statuses": [], "run_ats": [], "errors": [], "overlaps": []}
    made = [
        (occurrence_row(fate, timer.due_at, a.overlap), a.overlap)
        for a in advances
        if a.schedule_id in ok
        for timer, fate in a.occurrences()
    ]
    return {
        "statuses": [row.status for row, _ in made],
        "run_ats": [row.run_at for row, _ in made],
        "errors": [row.error for row, _ in made],
        "overlaps": [overlap for _, overlap in made],
    }


def _new_params(schedule: NewSchedule, now: datetime) -> Row:
    row = schedule_from_new(schedule, 0, now)
    params = _definition_params(row)
    params.update(namespace=row.namespace, name=row.name, now=now)
    return params


def _definition_params(schedule: Schedule) -> Row:
    for field in ("type", "subject", "timezone", "cron"):
        value = getattr(schedule, field)
        if value is not None and "\x00" in value:
            raise InvalidInput(field, "must not contain NUL characters")
    return {
        "type": schedule.type,
        "payload": Jsonb(schedule.payload, dumps=dump_json),
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
    }


def schedule_from_row(row: Row) -> Schedule:
    return Schedule(
        id=row["id"],
        namespace=row["namespace"],
        name=row["name"],
        type=row["type"],
        payload=row["payload"],
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
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        version=row["version"],
        overlap=row["overlap"],
        catch_up_grace=row["catch_up_grace"],
    )


def _exists(name: str) -> AlreadyExists:
    return AlreadyExists(f"a schedule named {name!r} already exists", field="name")


def _name_cursor(schedule: Schedule) -> str:
    return encode_name_cursor(schedule.name)
