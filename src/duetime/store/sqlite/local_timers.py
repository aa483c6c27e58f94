"""Local-form timers on the SQLite file: timers given as a wall time in a zone, whose instant
depends on the zone rules: those moved when the tz data changes (each move recorded), and the
tz-data version kept as meta. (Only PostgreSQL's SQL functions leave timers held.)

The base of :class:`~duetime.store.sqlite.schedules.SqliteSchedules` (the store's ``schedules``
part, whose materialiser drives this work), and usable alone on a store's database.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime

from duetime.model import HELD_AT, Timer
from duetime.model.moves import TimerMove
from duetime.store.codec import from_micros, to_micros
from duetime.store.queries import load_queries
from duetime.store.sqlite.database import SqliteDatabase
from duetime.store.sqlite.rows import timer_from_row

Q = load_queries("duetime.store.sqlite", "schedules.sql")


class SqliteLocalTimers:
    """Local-form timers and the tz-data bookkeeping on a SQLite file."""

    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db

    async def pending_local_timers(self, after_id: int, limit: int) -> list[Timer]:
        params = {"after_id": after_id, "limit": limit}
        return await self._db.read(
            lambda conn: [
                timer_from_row(r, self._db.sealing)
                for r in conn.execute(Q["pending_local_timers"], params)
            ]
        )

    async def held_local_timers(self, limit: int) -> list[Timer]:
        """None: only PostgreSQL's SQL functions store held timers, so this backend never holds
        one, and the materialiser's every round costs it no walk of the local-form timers."""
        return []

    async def release_local_timers(
        self,
        resolved: Sequence[tuple[int, datetime]],
        failed: Sequence[tuple[int, str]],
        now: datetime,
    ) -> int:
        if not resolved and not failed:
            return 0
        held_at, now_us = to_micros(HELD_AT), to_micros(now)

        def run(conn: sqlite3.Connection) -> int:
            changed = 0
            for id, due_at in resolved:
                row = {"id": id, "due_at": to_micros(due_at), "now": now_us, "held_at": held_at}
                changed += conn.execute(Q["release_local_timer"], row).rowcount
            for id, error in failed:
                failure: dict[str, object] = {
                    "id": id,
                    "error": error,
                    "now": now_us,
                    "held_at": held_at,
                }
                changed += conn.execute(Q["fail_local_timer"], failure).rowcount
            return changed

        changed = await self._db.write(run)
        if changed and resolved:
            self._db.announce(min(due_at for _, due_at in resolved))
        return changed

    async def reresolve_timers(
        self,
        changes: Sequence[tuple[int, datetime, datetime]],
        now: datetime,
        reason: str = "tz data",
    ) -> int:
        now_us = to_micros(now)
        rows = [
            {
                "id": id,
                "old_due_at": to_micros(old),
                "new_due_at": to_micros(new),
                "now": now_us,
                "reason": reason,
            }
            for id, old, new in changes
        ]

        def run(conn: sqlite3.Connection) -> int:
            moved = 0
            for row in rows:
                if conn.execute(Q["reresolve_timer"], row).rowcount:
                    conn.execute(Q["record_timer_move"], row)
                    moved += 1
            return moved

        moved = await self._db.write(run)
        if moved:
            self._db.announce(min(new for _, _, new in changes))
        return moved

    async def list_timer_moves(self, timer_id: int) -> list[TimerMove]:
        def run(conn: sqlite3.Connection) -> list[TimerMove]:
            rows = conn.execute(Q["list_timer_moves"], {"timer_id": timer_id})
            return [
                TimerMove(
                    timer_id=row["timer_id"],
                    moved_at=from_micros(row["moved_at"]),
                    reason=row["reason"],
                    local=datetime.fromisoformat(row["local"]),
                    timezone=row["timezone"],
                    from_at=from_micros(row["from_at"]),
                    to_at=from_micros(row["to_at"]),
                )
                for row in rows
            ]

        return await self._db.read(run)

    async def get_meta(self, key: str) -> str | None:
        def run(conn: sqlite3.Connection) -> str | None:
            row = conn.execute(Q["get_meta"], {"key": key}).fetchone()
            return None if row is None else str(row[0])

        return await self._db.read(run)

    async def set_meta(self, key: str, value: str, now: datetime) -> None:
        params = {"key": key, "value": value, "now": to_micros(now)}
        await self._db.write(lambda conn: conn.execute(Q["set_meta"], params))
