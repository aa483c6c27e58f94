"""Schedules in the SQLite file: the :class:`~duetime.store.parts.ScheduleStore` part of
:class:`~duetime.store.sqlite.store.SqliteStore`.

Calls run on the store's own connection thread, in its transactions (``BEGIN IMMEDIATE``), so
materialising a batch (read the due rows, plan, insert timers, advance rows) is one transaction
that no other process interleaves with.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from functools import partial
from typing import Any

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
from duetime.store.codec import dump_json, maybe_from_micros, to_micros
from duetime.store.cursors import decode_name_cursor, page
from duetime.store.parts import SchedulePlan
from duetime.store.queries import load_queries
from duetime.store.resealing import timer_writes
from duetime.store.room import ScheduleRoom
from duetime.store.sqlite.local_timers import SqliteLocalTimers
from duetime.store.sqlite.schedule_rows import (
    due_rows,
    name_cursor,
    new_params,
    saved_params,
    schedule_from_row,
)
from duetime.support.sealing import Sealing
from duetime.timemath.recurrence.overlap import Fate, gated

Q = load_queries("duetime.store.sqlite", "schedules.sql")


def _schedule_room(
    conn: sqlite3.Connection, namespace: str, names: Sequence[str], up_to: int
) -> tuple[int, int]:
    """What a cap on schedules needs to know: the namespace's schedules (counted no further
    than ``up_to``), and how many of ``names`` exist already."""
    params = {"namespace": namespace, "names": dump_json(list(names)), "up_to": up_to}
    held, present = conn.execute(Q["schedule_room"], params).fetchone()
    return int(held), int(present)


class SqliteSchedules(SqliteLocalTimers):
    """Schedule storage on a SQLite file (the calls run on its connection thread)."""

    backlog_growth = 10
    materialize_lanes = 1

    async def put_schedules(
        self,
        schedules: Iterable[NewSchedule],
        on_conflict: OnConflict,
        now: datetime,
        room: ScheduleRoom | None = None,
    ) -> list[Schedule | None]:
        schedules = list(schedules)  # all validated before the write lock is taken
        rows = [new_params(schedule, now, self._db.sealing) for schedule in schedules]

        def run(conn: sqlite3.Connection) -> list[Schedule | None]:
            if room is not None:  # under the write lock: racing creations count in turn
                room.check(*_schedule_room(conn, room.namespace, room.names, room.cap))
            # One prepared statement for the batch; under the write lock, the ids after the
            # last one given before are the rows it made.
            (before,) = conn.execute(Q["last_schedule_id"]).fetchone()
            conn.executemany(Q["insert_schedule"], rows)
            made = conn.execute(Q["schedules_made_after"], {"after": before}).fetchall()
            ids = {name: id for id, name in made}
            return stored_schedules(schedules, ids, on_conflict, now)

        stored = await self._db.write(run)
        _announce_next(self, [s.next_at for s in stored if s is not None and s.active])
        return stored

    async def hear_releases(self) -> None:
        """Wake this process's workers (and, through the channel, others) when the end of an
        occurrence releases the one buffered behind it. A file not migrated that far has no
        buffered occurrences: nothing to hear."""

        def run(conn: sqlite3.Connection) -> None:
            with contextlib.suppress(sqlite3.OperationalError):
                conn.execute(Q["hear_releases"])

        await self._db.read(run)

    async def get_schedule(self, namespace: str, name: str) -> Schedule | None:
        params = {"namespace": namespace, "name": name}

        def run(conn: sqlite3.Connection) -> Schedule | None:
            row = conn.execute(Q["get_schedule"], params).fetchone()
            return None if row is None else schedule_from_row(row, self._db.sealing)

        return await self._db.read(run)

    async def list_schedules(
        self, namespace: str, filter: ScheduleFilter, cursor: str | None, limit: int
    ) -> Page[Schedule]:
        params = {
            "namespace": namespace,
            "subject": filter.subject,
            "type": filter.type,
            "active": None if filter.active is None else int(filter.active),
            "after_name": decode_name_cursor(cursor),
            "limit": limit + 1,
        }

        def run(conn: sqlite3.Connection) -> Page[Schedule]:
            rows = conn.execute(Q["list_schedules"], params).fetchall()
            return page(
                rows, limit, partial(schedule_from_row, sealing=self._db.sealing), name_cursor
            )

        return await self._db.read(run)

    async def save_schedule(
        self, schedule: Schedule, now: datetime, release_after: datetime | None
    ) -> Schedule | None:
        params = saved_params(schedule, now, self._db.sealing)

        def run(conn: sqlite3.Connection) -> Schedule | None:
            row = conn.execute(Q["save_schedule"], params).fetchone()
            if row is None:
                return None
            if release_after is not None:
                release = {"schedule_id": schedule.id, "after": to_micros(release_after)}
                conn.execute(Q["release_occurrences"], release)
            return schedule_from_row(row, self._db.sealing)

        saved = await self._db.write(run)
        if saved is not None and saved.active:
            _announce_next(self, [saved.next_at])
        return saved

    async def delete_schedule(
        self, namespace: str, name: str, now: datetime
    ) -> tuple[Schedule, int] | None:
        params = {"namespace": namespace, "name": name}

        def run(conn: sqlite3.Connection) -> tuple[Schedule, int] | None:
            row = conn.execute(Q["delete_schedule"], params).fetchone()
            if row is None:
                return None
            schedule = schedule_from_row(row, self._db.sealing)
            cancel = {"schedule_id": schedule.id, "now": to_micros(now)}
            return schedule, conn.execute(Q["cancel_occurrences"], cancel).rowcount

        return await self._db.write(run)

    async def due_schedules(
        self, namespace: str, horizon: datetime, limit: int, now: datetime | None = None
    ) -> list[Schedule]:
        params = {
            "namespace": namespace,
            "horizon": to_micros(horizon),
            "limit": limit,
            "now": to_micros(horizon if now is None else now),
        }
        return await self._db.read(lambda conn: _due(conn, params, self._db.sealing))

    async def advance_schedules(
        self, advances: Sequence[ScheduleAdvance], now: datetime
    ) -> list[int]:
        now_us = to_micros(now)

        def run(conn: sqlite3.Connection) -> list[int]:
            return _advance(conn, advances, now_us)[0]

        advanced = await self._db.write(run)
        _announce_timers(self, advances, set(advanced))
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
        now_us = to_micros(now)
        params: dict[str, object] = {
            "namespace": namespace,
            "horizon": to_micros(horizon),
            "limit": limit,
            "now": now_us,
        }
        query = Q["due_rows"]
        if ids is not None:
            params.update(first_id=ids.start, stop_id=ids.stop)
            query = Q["due_window"]
        planned: list[ScheduleAdvance] = []
        released: list[int] = []

        def read_due(conn: sqlite3.Connection) -> list[DueSchedule]:
            cursor = conn.cursor()
            cursor.row_factory = None
            return due_rows(cursor.execute(query, params).fetchall())

        # One writer (and one connection thread) serves every tenant: finding occurrences is
        # done before it is taken, in a thread, for the rows due now; the plan made under it
        # (from the rows as its transaction reads them, with their occurrence states) then
        # finds them in the planner's cache.
        if early := await self._db.read(read_due):
            await asyncio.to_thread(plan, early, {})

        def run(conn: sqlite3.Connection) -> Materialized:
            cursor = conn.cursor()
            cursor.row_factory = None
            due = due_rows(cursor.execute(query, params).fetchall())
            # A full batch or a window: more follow (a backlog). Its commit lets the WAL grow
            # to 40,000 pages before a checkpoint (schedules.sql, backlog_checkpoint), so a page
            # that several batches change is copied to the database once, not once a batch;
            # the short batch that ends the backlog puts the usual cadence back.
            backlog = ids is not None or len(due) >= limit
            conn.execute(Q["backlog_checkpoint" if backlog else "usual_checkpoint"])
            if not due:
                return Materialized()
            states, released[:] = _states(conn, due, now_us)
            planned[:] = plan(due, states)
            advanced, created = _advance(conn, planned, now_us)
            return Materialized(len(due), len(advanced), created)

        result = await self._db.write(run)
        if result.timers:
            _announce_timers(self, planned, {a.schedule_id for a in planned})
        if released:
            self._db.announce(now)
        return result

    async def schedule_ids(self) -> range | None:
        def run(conn: sqlite3.Connection) -> range | None:
            first, last = conn.execute(Q["schedule_ids"]).fetchone()
            return None if first is None else range(first, last + 1)

        return await self._db.read(run)

    async def next_schedule_at(
        self, namespace: str, ahead: timedelta = timedelta(0)
    ) -> datetime | None:
        def run(conn: sqlite3.Connection) -> datetime | None:
            next_at, gated_at = conn.execute(
                Q["next_schedule_at"], {"namespace": namespace}
            ).fetchone()
            return next_wake(maybe_from_micros(next_at), maybe_from_micros(gated_at), ahead)

        return await self._db.read(run)

    async def schedules_after(self, after_id: int, limit: int) -> list[Schedule]:
        params = {"after_id": after_id, "limit": limit}
        return await self._db.read(
            lambda conn: [
                schedule_from_row(r, self._db.sealing)
                for r in conn.execute(Q["schedules_after"], params)
            ]
        )

    async def reseal(self, after: int, limit: int) -> tuple[int, int | None]:
        sealing = self._db.sealing

        def run(conn: sqlite3.Connection) -> tuple[int, int | None]:
            params = {"after": after, "limit": limit}
            rows = conn.execute(Q["reseal_schedules_scan"], params).fetchall()
            if not rows:
                return 0, None
            writes = timer_writes(sealing, rows)[0]
            changed = sum(conn.execute(Q["reseal_schedule_payload"], w).rowcount for w in writes)
            return changed, rows[-1]["id"]

        return await self._db.write(run)


def _due(conn: sqlite3.Connection, params: dict[str, Any], sealing: Sealing) -> list[Schedule]:
    return [schedule_from_row(row, sealing) for row in conn.execute(Q["due_schedules"], params)]


def _states(
    conn: sqlite3.Connection, due: Sequence[DueSchedule], now_us: int
) -> tuple[dict[int, OccurrenceState], list[int]]:
    """The occurrence states of the due schedules with an overlap policy (none: no query),
    after releasing a buffered occurrence left with nothing unfinished before it (see
    :func:`~duetime.model.schedules.stranded`)."""
    ids = [schedule.id for schedule in due if gated(schedule.overlap)]
    if not ids:
        return {}, []
    rows = conn.execute(Q["occurrence_states"], {"ids": dump_json(ids)})
    states = {row[0]: OccurrenceState(bool(row[1]), bool(row[2])) for row in rows}
    stuck, states = stranded(states)
    if stuck:
        conn.execute(Q["release_buffered"], {"ids": dump_json(stuck), "now": now_us})
    return states, stuck


def _advance(
    conn: sqlite3.Connection, advances: Sequence[ScheduleAdvance], now_us: int
) -> tuple[list[int], int]:
    """Advance the rows whose version matches (one statement), then insert only their timers
    (one statement).

    Both in the order of the schedules' ids (rowids): the due rows come by next occurrence,
    which jumps about the table (per-user schedules due at one instant lie one id in 1,200
    apart); in rowid order each row is found near the last one's place in the tree, whose pages
    are then at hand."""
    if not advances:
        return [], 0
    advances = sorted(advances, key=_schedule_id)
    batch = dump_json(
        [
            (
                a.schedule_id,
                a.version,
                None if a.next_at is None else to_micros(a.next_at),
                to_micros(a.after_at),
                None if a.last_at is None else to_micros(a.last_at),
            )
            for a in advances
        ]
    )
    advanced = [row[0] for row in conn.execute(Q["advance_schedules"], {"batch": batch})]
    if not advanced:
        return [], 0
    micros: dict[datetime, int] = {}

    def us(instant: datetime) -> int:
        try:
            return micros[instant]
        except KeyError:
            found = micros[instant] = to_micros(instant)
            return found

    timers = [
        (schedule_id, key, us(due_at), status, us(run_at), error, overlap)
        for schedule_id, key, due_at, status, run_at, error, overlap in occurrence_values(
            advances, set(advanced)
        )
    ]
    created = 0
    if timers:
        params = {"batch": dump_json(timers), "now": now_us}
        created = max(conn.execute(Q["insert_occurrences"], params).rowcount, 0)
    return advanced, created


def _schedule_id(advance: ScheduleAdvance) -> int:
    return advance.schedule_id


def _announce_next(store: SqliteSchedules, instants: Sequence[datetime | None]) -> None:
    """Wake materialisers (and workers, harmlessly) for a schedule due soon."""
    known = [instant for instant in instants if instant is not None]
    if known:
        store._db.announce(min(known))


def _announce_timers(
    store: SqliteSchedules, advances: Sequence[ScheduleAdvance], advanced: set[int]
) -> None:
    due = [
        t.due_at
        for a in advances
        if a.schedule_id in advanced
        for t, fate in a.occurrences()
        if fate is Fate.FIRE
    ]
    if due:
        store._db.announce(min(due))
