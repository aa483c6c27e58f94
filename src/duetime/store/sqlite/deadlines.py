"""The deadline watch in the SQLite file: the :class:`~duetime.store.parts.DeadlineStore` part
of :class:`~duetime.store.sqlite.store.SqliteStore`, on the store's connection thread and in
its write transactions (a round's step is one of them)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from duetime.model import Schedule
from duetime.model.deadlines import (
    WATCH_ACTOR,
    LastSuccess,
    Miss,
    RecordedMiss,
    ScheduleWatch,
    WatchStep,
    missed_event,
    pause_target,
    paused_event,
)
from duetime.store.codec import dump_json, from_micros, maybe_from_micros, to_micros
from duetime.store.queries import load_queries
from duetime.store.sqlite.database import SqliteDatabase
from duetime.store.sqlite.schedule_rows import schedule_from_row
from duetime.support.sealing import Sealing
from duetime.timemath.recurrence.deadline import OccurrenceFacts

Q = load_queries("duetime.store.sqlite", "deadlines.sql")


class SqliteDeadlines:
    """The deadline watch's rows, misses and events in one SQLite file."""

    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db

    async def watched(self, namespace: str, after_id: int, limit: int) -> list[Schedule]:
        params = {"namespace": namespace, "after_id": after_id, "limit": limit}

        def run(conn: sqlite3.Connection) -> list[Schedule]:
            rows = conn.execute(Q["watched"], params).fetchall()
            return [_watched(row, self._db) for row in rows]

        return await self._db.read(run)

    async def watches(self, schedule_ids: Sequence[int]) -> dict[int, ScheduleWatch]:
        params = {"ids": dump_json(list(schedule_ids))}

        def run(conn: sqlite3.Connection) -> dict[int, ScheduleWatch]:
            rows = conn.execute(Q["watches"], params).fetchall()
            return {row["schedule_id"]: _watch(row, "") for row in rows}

        return await self._db.read(run)

    async def occurrences(self, namespace: str, keys: Sequence[str]) -> dict[str, OccurrenceFacts]:
        params = {"namespace": namespace, "keys": dump_json(list(keys))}

        def run(conn: sqlite3.Connection) -> dict[str, OccurrenceFacts]:
            return {
                key: OccurrenceFacts(status, maybe_from_micros(completed_at), error)
                for key, status, completed_at, error in conn.execute(Q["occurrences"], params)
            }

        return await self._db.read(run)

    async def record(self, steps: Sequence[WatchStep], now: datetime) -> list[list[Miss] | None]:
        sealing = self._db.sealing

        def run(conn: sqlite3.Connection) -> list[list[Miss] | None]:
            return [_record(conn, step, now, sealing) for step in steps]

        recorded = await self._db.write(run)
        if any(recorded[i] or step.pause for i, step in enumerate(steps)):
            self._db.announce(now)
        return recorded

    async def misses(
        self, namespace: str, schedule_id: int | None, limit: int
    ) -> list[RecordedMiss]:
        params = {"namespace": namespace, "schedule_id": schedule_id, "limit": limit}

        def run(conn: sqlite3.Connection) -> list[RecordedMiss]:
            return [
                RecordedMiss(
                    row["schedule_id"],
                    row["schedule_name"],
                    from_micros(row["nominal_at"]),
                    row["reason"],
                    from_micros(row["deadline_at"]),
                    from_micros(row["recorded_at"]),
                )
                for row in conn.execute(Q["recent_misses"], params)
            ]

        return await self._db.read(run)

    async def successes(self) -> list[LastSuccess]:
        def run(conn: sqlite3.Connection) -> list[LastSuccess]:
            return [
                LastSuccess(ns, name, maybe_from_micros(at), from_micros(created), misses)
                for ns, name, at, created, misses in conn.execute(Q["successes"])
            ]

        return await self._db.read(run)


def _watched(row: sqlite3.Row, db: SqliteDatabase) -> Schedule:
    schedule = schedule_from_row(row, db.sealing)
    if row["w_checked_through"] is None:
        return schedule
    return replace(schedule, watch=_watch(row, "w_"))


def _watch(row: sqlite3.Row, prefix: str) -> ScheduleWatch:
    return ScheduleWatch(
        checked_through=from_micros(row[f"{prefix}checked_through"]),
        failures_in_row=row[f"{prefix}failures_in_row"],
        misses=row[f"{prefix}misses"],
        last_miss_at=maybe_from_micros(row[f"{prefix}last_miss_at"]),
        last_miss_reason=row[f"{prefix}last_miss_reason"],
        last_success_at=maybe_from_micros(row[f"{prefix}last_success_at"]),
    )


def _watch_params(step: WatchStep, now: int) -> dict[str, Any]:
    watch = step.watch
    return {
        "schedule_id": step.schedule_id,
        "namespace": step.namespace,
        "since": None if step.since is None else to_micros(step.since),
        "checked_through": to_micros(watch.checked_through),
        "failures_in_row": watch.failures_in_row,
        "misses": watch.misses,
        "last_miss_at": None if watch.last_miss_at is None else to_micros(watch.last_miss_at),
        "last_miss_reason": watch.last_miss_reason,
        "last_success_at": (
            None if watch.last_success_at is None else to_micros(watch.last_success_at)
        ),
        "now": now,
    }


def _record(
    conn: sqlite3.Connection, step: WatchStep, now: datetime, sealing: Sealing
) -> list[Miss] | None:
    """One step, fenced by its first statement (a row another round moved: nothing written)."""
    at = to_micros(now)
    params = _watch_params(step, at)
    moved = conn.execute(Q["start_watch" if step.since is None else "move_watch"], params)
    if moved.rowcount != 1:
        return None
    recorded: list[Miss] = []
    events = []
    for miss in step.misses:
        row = {
            "schedule_id": step.schedule_id,
            "nominal_at": to_micros(miss.nominal_at),
            "namespace": step.namespace,
            "name": step.name,
            "reason": miss.reason,
            "deadline_at": to_micros(miss.deadline_at),
            "now": at,
        }
        if conn.execute(Q["record_miss"], row).rowcount == 1:
            recorded.append(miss)
            events.append(missed_event(step, miss))
    if step.pause and conn.execute(Q["pause_schedule"], params).rowcount == 1:
        after = to_micros(step.release_after or now)
        conn.execute(Q["withdraw_occurrences"], {**params, "after": after})
        target = dump_json(pause_target(step))
        audit = {"namespace": step.namespace, "now": at, "actor": WATCH_ACTOR}
        conn.execute(Q["audit_pause"], {**audit, "target": target})
        events.append(paused_event(step, now))
    for type, key, payload in events:
        event = {
            "namespace": step.namespace,
            "key": key,
            "type": type,
            "payload": sealing.seal_json(step.namespace, payload),
            "max_attempts": step.max_attempts,
            "now": at,
        }
        conn.execute(Q["raise_event"], event)
    return recorded
