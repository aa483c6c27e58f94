"""The deadline watch in PostgreSQL: the :class:`~duetime.store.parts.DeadlineStore` part of
:class:`~duetime.store.postgres.store.PostgresStore`. A round's step is one transaction; its
events wake the workers (NOTIFY) when it commits."""

from __future__ import annotations

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
from duetime.store.postgres.database import Conn, Database
from duetime.store.postgres.fetching import fetch_all
from duetime.store.postgres.notices import Notices
from duetime.store.postgres.rows import Row
from duetime.store.postgres.schedule_rows import schedule_from_row
from duetime.store.queries import load_queries
from duetime.support.jsontext import json_text
from duetime.support.sealing import Sealing
from duetime.timemath.recurrence.deadline import OccurrenceFacts

Q = load_queries("duetime.store.postgres", "deadlines.sql")


class PostgresDeadlines:
    """The deadline watch's rows, misses and events in one PostgreSQL schema."""

    def __init__(self, db: Database, notices: Notices) -> None:
        self._db = db
        self._notices = notices

    async def watched(self, namespace: str, after_id: int, limit: int) -> list[Schedule]:
        params = {"namespace": namespace, "after_id": after_id, "limit": limit}

        async def run(conn: Conn) -> list[Schedule]:
            rows = await fetch_all(conn, Q["watched"], params)
            return [self._watched(row) for row in rows]

        return await self._db.read(run)

    async def watches(self, schedule_ids: Sequence[int]) -> dict[int, ScheduleWatch]:
        async def run(conn: Conn) -> dict[int, ScheduleWatch]:
            rows = await fetch_all(conn, Q["watches"], {"ids": list(schedule_ids)})
            return {row["schedule_id"]: _watch(row, "") for row in rows}

        return await self._db.read(run)

    async def occurrences(self, namespace: str, keys: Sequence[str]) -> dict[str, OccurrenceFacts]:
        params = {"namespace": namespace, "keys": list(keys)}

        async def run(conn: Conn) -> dict[str, OccurrenceFacts]:
            rows = await fetch_all(conn, Q["occurrences"], params)
            return {
                r["key"]: OccurrenceFacts(r["status"], r["completed_at"], r["last_error"])
                for r in rows
            }

        return await self._db.read(run)

    async def record(self, steps: Sequence[WatchStep], now: datetime) -> list[list[Miss] | None]:
        sealing = self._db.sealing

        async def run(conn: Conn) -> list[list[Miss] | None]:
            recorded = [await _record(conn, step, now, sealing) for step in steps]
            if any(recorded[i] or step.pause for i, step in enumerate(steps)):
                await self._notices.notify_earliest(conn, [now])
            return recorded

        recorded = await self._db.write(run)
        if any(recorded[i] or step.pause for i, step in enumerate(steps)):
            self._notices.here_earliest([now])
        return recorded

    async def misses(
        self, namespace: str, schedule_id: int | None, limit: int
    ) -> list[RecordedMiss]:
        params = {"namespace": namespace, "schedule_id": schedule_id, "limit": limit}

        async def run(conn: Conn) -> list[RecordedMiss]:
            rows = await fetch_all(conn, Q["recent_misses"], params)
            return [
                RecordedMiss(
                    r["schedule_id"],
                    r["schedule_name"],
                    r["nominal_at"],
                    r["reason"],
                    r["deadline_at"],
                    r["recorded_at"],
                )
                for r in rows
            ]

        return await self._db.read(run)

    async def successes(self) -> list[LastSuccess]:
        async def run(conn: Conn) -> list[LastSuccess]:
            rows = await fetch_all(conn, Q["successes"], {})
            return [
                LastSuccess(
                    r["namespace"], r["name"], r["last_success_at"], r["created_at"], r["misses"]
                )
                for r in rows
            ]

        return await self._db.read(run)

    def _watched(self, row: Row) -> Schedule:
        schedule = schedule_from_row(row, self._db.sealing)
        if row["w_checked_through"] is None:
            return schedule
        return replace(schedule, watch=_watch(row, "w_"))


def _watch(row: Row, prefix: str) -> ScheduleWatch:
    return ScheduleWatch(
        checked_through=row[f"{prefix}checked_through"],
        failures_in_row=row[f"{prefix}failures_in_row"],
        misses=row[f"{prefix}misses"],
        last_miss_at=row[f"{prefix}last_miss_at"],
        last_miss_reason=row[f"{prefix}last_miss_reason"],
        last_success_at=row[f"{prefix}last_success_at"],
    )


def _watch_params(step: WatchStep, now: datetime) -> dict[str, Any]:
    watch = step.watch
    return {
        "schedule_id": step.schedule_id,
        "namespace": step.namespace,
        "since": step.since,
        "checked_through": watch.checked_through,
        "failures_in_row": watch.failures_in_row,
        "misses": watch.misses,
        "last_miss_at": watch.last_miss_at,
        "last_miss_reason": watch.last_miss_reason,
        "last_success_at": watch.last_success_at,
        "now": now,
    }


async def _record(
    conn: Conn, step: WatchStep, now: datetime, sealing: Sealing
) -> list[Miss] | None:
    """One step, fenced by its first statement (a row another round moved: nothing written)."""
    params = _watch_params(step, now)
    moved = await conn.execute(Q["start_watch" if step.since is None else "move_watch"], params)
    if moved.rowcount != 1:
        return None
    recorded: list[Miss] = []
    events = []
    for miss in step.misses:
        row = {
            "schedule_id": step.schedule_id,
            "nominal_at": miss.nominal_at,
            "namespace": step.namespace,
            "name": step.name,
            "reason": miss.reason,
            "deadline_at": miss.deadline_at,
            "now": now,
        }
        if (await conn.execute(Q["record_miss"], row)).rowcount == 1:
            recorded.append(miss)
            events.append(missed_event(step, miss))
    if step.pause and (await conn.execute(Q["pause_schedule"], params)).rowcount == 1:
        await conn.execute(
            Q["withdraw_occurrences"], {**params, "after": step.release_after or now}
        )
        target = json_text(pause_target(step))
        audit = {"namespace": step.namespace, "now": now, "actor": WATCH_ACTOR}
        await conn.execute(Q["audit_pause"], {**audit, "target": target})
        events.append(paused_event(step, now))
    for type, key, payload in events:
        event = {
            "namespace": step.namespace,
            "key": key,
            "type": type,
            "payload": sealing.seal_json(step.namespace, payload),
            "max_attempts": step.max_attempts,
            "now": now,
        }
        await conn.execute(Q["raise_event"], event)
    return recorded
