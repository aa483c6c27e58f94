"""Schedules in PostgreSQL: the :class:`~duetime.store.parts.ScheduleStore` part of
:class:`~duetime.store.postgres.store.PostgresStore`.

Materialising locks the due rows with ``FOR UPDATE SKIP LOCKED``, so several workers share the
due schedules instead of all planning the same ones; the version check and the unique timer key
keep it exactly-once even without the lock.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from functools import partial
from typing import TypeVar

from psycopg import AsyncCursor
from psycopg.errors import UniqueViolation

from duetime.model import OnConflict, Page, Schedule
from duetime.model.schedules import (
    DueSchedule,
    Materialized,
    NewSchedule,
    OccurrenceState,
    ScheduleAdvance,
    ScheduleFilter,
    next_wake,
    occurrence_values,
    stored_schedules,
    stranded,
)
from duetime.store.cursors import decode_name_cursor, page
from duetime.store.parts import SchedulePlan
from duetime.store.postgres.database import Conn
from duetime.store.postgres.fetching import fetch_all
from duetime.store.postgres.local_timers import PostgresLocalTimers
from duetime.store.postgres.rows import Row
from duetime.store.postgres.schedule_rows import (
    advance_params,
    definition_params,
    due_row,
    name_cursor,
    new_batch_params,
    schedule_from_row,
)
from duetime.store.queries import load_queries
from duetime.store.resealing import timer_writes
from duetime.store.room import ScheduleRoom
from duetime.store.streams import Replayable, chunked
from duetime.timemath.recurrence.overlap import gated

Q = load_queries("duetime.store.postgres", "schedules.sql")
LOCK_NAMESPACE_ROW = load_queries("duetime.store.postgres", "namespaces.sql")["lock_namespace_row"]
R = TypeVar("R")
PUT_SCHEDULES_CHUNK = 500
"""Schedules a statement of ``put_schedules``: the client validates and encodes the next chunk
while the server inserts this one."""


class PostgresSchedules(PostgresLocalTimers):
    """Schedule storage in one PostgreSQL schema (its pool, its notifications)."""

    backlog_growth = 1
    materialize_lanes = 2

    async def put_schedules(
        self,
        schedules: Iterable[NewSchedule],
        on_conflict: OnConflict,
        now: datetime,
        room: ScheduleRoom | None = None,
    ) -> list[Schedule | None]:
        # In chunks in one pipeline, as put_timers: while the server inserts a chunk, the next
        # is taken from ``schedules`` -- validated, when it is the app's lazy stream -- and
        # encoded. A name given twice is stored once, the first time: a later chunk's insert
        # finds it taken, as the same chunk's does.
        source = Replayable(schedules)  # a transaction PostgreSQL rolls back is run again

        async def run(conn: Conn) -> list[Schedule | None]:
            if room is not None:  # see duetime.store.room: the count after the row's lock
                await conn.execute(LOCK_NAMESPACE_ROW, {"namespace": room.namespace})
                held, present = await self._schedule_room(
                    conn, room.namespace, room.names, room.cap
                )
                room.check(held, present)
            read: list[NewSchedule] = []
            cursors: list[AsyncCursor[Row]] = []
            async with conn.pipeline() as pipeline:
                for chunk in chunked(source, PUT_SCHEDULES_CHUNK):
                    cursor = conn.cursor(binary=True)
                    await cursor.execute(
                        Q["insert_schedules"], new_batch_params(chunk, now, self._db.sealing)
                    )
                    cursors.append(cursor)
                    read.extend(chunk)
                await pipeline.sync()
            made = {row["name"]: row["id"] for c in cursors for row in await c.fetchall()}
            stored = stored_schedules(read, made, on_conflict, now)
            await self._notices.notify_earliest(conn, _active_next(stored))
            return stored

        stored = await self._write(run)
        self._notices.here_earliest(_active_next(stored))
        return stored

    async def _schedule_room(
        self, conn: Conn, namespace: str, names: Sequence[str], up_to: int
    ) -> tuple[int, int]:
        """What a cap on schedules needs to know: the namespace's schedules (counted no further
        than ``up_to``), and how many of ``names`` exist already."""
        params = {"namespace": namespace, "names": list(names), "up_to": up_to}
        (row,) = await fetch_all(conn, Q["schedule_room"], params)
        return int(row["held"]), int(row["present"])

    async def get_schedule(self, namespace: str, name: str) -> Schedule | None:
        params = {"namespace": namespace, "name": name}

        async def run(conn: Conn) -> Schedule | None:
            rows = await fetch_all(conn, Q["get_schedule"], params)
            return schedule_from_row(rows[0], self._db.sealing) if rows else None

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
            return page(
                rows, limit, partial(schedule_from_row, sealing=self._db.sealing), name_cursor
            )

        return await self._db.read(run)

    async def save_schedule(
        self, schedule: Schedule, now: datetime, release_after: datetime | None
    ) -> Schedule | None:
        params = definition_params(schedule, self._db.sealing)
        params.update(id=schedule.id, version=schedule.version, now=now)

        async def run(conn: Conn) -> Schedule | None:
            rows = await fetch_all(conn, Q["save_schedule"], params)
            if not rows:
                return None
            if release_after is not None:
                release = {"schedule_id": schedule.id, "after": release_after}
                await conn.execute(Q["release_occurrences"], release)
            saved = schedule_from_row(rows[0], self._db.sealing)
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
            schedule = schedule_from_row(rows[0], self._db.sealing)
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
            return [
                schedule_from_row(r, self._db.sealing)
                for r in await fetch_all(conn, Q["due_schedules"], params)
            ]

        return await self._db.read(run)

    async def advance_schedules(
        self, advances: Sequence[ScheduleAdvance], now: datetime
    ) -> list[int]:
        earliest: list[datetime | None] = []

        async def run(conn: Conn) -> list[int]:
            await conn.execute(Q["by_index"])
            advanced, _, earliest[:] = await _advance(conn, advances, now)
            await self._notices.notify_earliest(conn, earliest)
            return advanced

        advanced = await self._write(run)
        self._notices.here_earliest(earliest)
        return advanced

    async def materialize(
        self,
        namespace: str,
        horizon: datetime,
        limit: int,
        plan: SchedulePlan,
        now: datetime,
        ids: range | None = None,
    ) -> Materialized:
        params: Row = {"namespace": namespace, "horizon": horizon, "limit": limit, "now": now}
        query = Q["lock_due_schedules"]
        if ids is not None:
            params.update(first_id=ids.start, stop_id=ids.stop)
            query = Q["lock_due_window"]
        earliest: list[datetime | None] = []

        async def run(conn: Conn) -> Materialized:
            await conn.execute(Q["by_index"])
            cur = conn.cursor(row_factory=due_row, binary=True)
            await cur.execute(query, params)
            due = await cur.fetchall()
            if not due:
                return Materialized()
            states, released = await _states(conn, due, now)
            advances = plan(due, states)
            advanced, created, runnable = await _advance(conn, advances, now)
            earliest[:] = [*runnable, *released]
            await self._notices.notify_earliest(conn, earliest)
            return Materialized(len(due), len(advanced), created)

        result = await self._write(run)
        self._notices.here_earliest(earliest)
        return result

    async def schedule_ids(self) -> range | None:
        async def run(conn: Conn) -> range | None:
            (row,) = await fetch_all(conn, Q["schedule_ids"], {})
            return None if row["first_id"] is None else range(row["first_id"], row["last_id"] + 1)

        return await self._db.read(run)

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
            return [schedule_from_row(row, self._db.sealing) for row in rows]

        return await self._db.read(run)

    async def reseal(self, after: int, limit: int) -> tuple[int, int | None]:
        sealing = self._db.sealing

        async def run(conn: Conn) -> tuple[int, int | None]:
            params = {"after": after, "limit": limit}
            rows = await fetch_all(conn, Q["reseal_schedules_scan"], params)
            if not rows:
                return 0, None
            changed = 0
            for write in timer_writes(sealing, rows)[0]:
                changed += (await conn.execute(Q["reseal_schedule_payload"], write)).rowcount
            return changed, rows[-1]["id"]

        return await self._db.write(run)


async def _states(
    conn: Conn, due: Sequence[DueSchedule], now: datetime
) -> tuple[dict[int, OccurrenceState], list[datetime]]:
    """The occurrence states of the due schedules with an overlap policy (none: no query),
    after releasing a buffered occurrence left with nothing unfinished before it (see
    :func:`~duetime.model.schedules.stranded`); ``[now]`` when one was released."""
    ids = [schedule.id for schedule in due if gated(schedule.overlap)]
    if not ids:
        return {}, []
    rows = await fetch_all(conn, Q["occurrence_states"], {"schedule_ids": ids})
    states = {r["schedule_id"]: OccurrenceState(r["unfinished"], r["buffered"]) for r in rows}
    stuck, states = stranded(states)
    if not stuck:
        return states, []
    await conn.execute(Q["release_buffered"], {"schedule_ids": stuck, "now": now})
    return states, [now]


async def _advance(
    conn: Conn, advances: Sequence[ScheduleAdvance], now: datetime
) -> tuple[list[int], int, list[datetime | None]]:
    """Advance the rows whose version matches and insert only their timers, in one statement:
    the ids advanced, how many timers were made, and the earliest that will run. The fast
    statement first; should an occurrence's key exist (a deleted schedule's cancelled
    occurrence, a user's timer of that key), the one that minds existing keys instead. In a
    transaction that has run ``by_index``."""
    if not advances:
        return [], 0, []
    made = occurrence_values(advances, {a.schedule_id for a in advances})
    params = advance_params(advances, made, now)
    cur = conn.cursor(binary=True)
    try:
        async with conn.transaction():  # a savepoint: only the statement is undone
            await cur.execute(Q["advance_fresh"], params)
    except UniqueViolation:  # an occurrence's key exists: the statement that minds them
        await cur.execute(Q["advance_schedules"], params)
    row = await cur.fetchone()
    assert row is not None  # an aggregate: always one row
    return list(row["advanced"]), row["created"], [row["earliest"]]


def _active_next(stored: Sequence[Schedule | None]) -> list[datetime | None]:
    return [s.next_at for s in stored if s is not None and s.active]
