"""The even spread of run windows in SQLite (``store.spreads``): one UPDATE a group."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from duetime.store.codec import from_micros, to_micros
from duetime.store.queries import load_queries
from duetime.store.run_windows import SpreadGroup
from duetime.store.sqlite.database import SqliteDatabase
from duetime.timemath.run_window import window_micros

Q = load_queries("duetime.store.sqlite", "spreads.sql")


class SqliteSpreads:
    """Spreads groups in one write transaction, then wakes the workers for the earliest row."""

    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db

    async def group_size(self, group: SpreadGroup) -> int:
        def run(conn: sqlite3.Connection) -> int:
            (total,) = conn.execute(Q["group_size"], _params(group)).fetchone()
            return int(total)

        return await self._db.read(run)

    async def spread(self, groups: Sequence[SpreadGroup]) -> int:
        def run(conn: sqlite3.Connection) -> list[int]:
            moved: list[int] = []
            for group in groups:
                rows = conn.execute(Q["spread_group"], _params(group))
                moved.extend(row[0] for row in rows)
            return moved

        if not groups:
            return 0
        moved = await self._db.write(run)
        if moved:
            self._db.announce(from_micros(min(moved)))
        return len(moved)


def _params(group: SpreadGroup) -> dict[str, object]:
    return {
        "namespace": group.namespace,
        "type": group.type,
        "due_at": to_micros(group.due_at),
        "window": window_micros(group.window),
    }
