"""Local-form timers in PostgreSQL: timers given as a wall time in a zone, whose instant
depends on the zone rules: the held ones the SQL functions left for duetime to resolve, those
moved when the tz data changes (each move recorded), and the tz-data version kept as meta.

The base of :class:`~duetime.store.postgres.schedules.PostgresSchedules` (the store's
``schedules`` part, whose materialiser drives this work), and usable alone on a schema's pool.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TypeVar

import psycopg

from duetime.errors import InvalidInput
from duetime.model import Timer
from duetime.model.moves import TimerMove
from duetime.store.postgres.database import Conn, Database, Work
from duetime.store.postgres.fetching import fetch_all, fetch_value
from duetime.store.postgres.notices import Notices
from duetime.store.postgres.rows import timer_from_row
from duetime.store.queries import load_queries

Q = load_queries("duetime.store.postgres", "schedules.sql")
R = TypeVar("R")


class PostgresLocalTimers:
    """Local-form timers and the tz-data bookkeeping in one PostgreSQL schema."""

    def __init__(self, db: Database, notices: Notices) -> None:
        self._db = db
        self._notices = notices

    async def pending_local_timers(self, after_id: int, limit: int) -> list[Timer]:
        params = {"after_id": after_id, "limit": limit}

        async def run(conn: Conn) -> list[Timer]:
            rows = await fetch_all(conn, Q["pending_local_timers"], params)
            return [timer_from_row(row, self._db.sealing) for row in rows]

        return await self._db.read(run)

    async def held_local_timers(self, limit: int) -> list[Timer]:
        async def run(conn: Conn) -> list[Timer]:
            rows = await fetch_all(conn, Q["held_local_timers"], {"limit": limit})
            return [timer_from_row(row, self._db.sealing) for row in rows]

        return await self._db.read(run)

    async def release_local_timers(
        self,
        resolved: Sequence[tuple[int, datetime]],
        failed: Sequence[tuple[int, str]],
        now: datetime,
    ) -> int:
        if not resolved and not failed:
            return 0
        earliest = min((due_at for _, due_at in resolved), default=None)

        async def run(conn: Conn) -> int:
            changed = 0
            if resolved:
                params = {
                    "ids": [id for id, _ in resolved],
                    "due_ats": [due_at for _, due_at in resolved],
                    "now": now,
                }
                changed += (await conn.execute(Q["release_local_timers"], params)).rowcount
            if failed:
                params = {
                    "ids": [id for id, _ in failed],
                    "errors": [error for _, error in failed],
                    "now": now,
                }
                changed += (await conn.execute(Q["fail_local_timers"], params)).rowcount
            if changed and earliest is not None:
                await self._notices.notify(conn, earliest)
            return changed

        changed = await self._write(run)
        if changed and earliest is not None:
            self._notices.here(earliest)
        return changed

    async def reresolve_timers(
        self,
        changes: Sequence[tuple[int, datetime, datetime]],
        now: datetime,
        reason: str = "tz data",
    ) -> int:
        if not changes:
            return 0
        params = {
            "ids": [id for id, _, _ in changes],
            "old_due_ats": [old for _, old, _ in changes],
            "new_due_ats": [new for _, _, new in changes],
            "now": now,
            "reason": reason,
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

    async def list_timer_moves(self, timer_id: int) -> list[TimerMove]:
        async def run(conn: Conn) -> list[TimerMove]:
            rows = await fetch_all(conn, Q["list_timer_moves"], {"timer_id": timer_id})
            return [TimerMove(**row) for row in rows]

        return await self._db.read(run)

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
