"""The even spread of run windows in PostgreSQL (``store.spreads``): one UPDATE a group."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from duetime.store.postgres.database import Conn, Database
from duetime.store.postgres.notices import Notices
from duetime.store.queries import load_queries
from duetime.store.run_windows import SpreadGroup
from duetime.timemath.run_window import window_micros

Q = load_queries("duetime.store.postgres", "spreads.sql")


class PostgresSpreads:
    """Spreads groups in one transaction, then wakes the workers for the earliest moved row."""

    def __init__(self, db: Database, notices: Notices) -> None:
        self._db = db
        self._notices = notices

    async def group_size(self, group: SpreadGroup) -> int:
        async def run(conn: Conn) -> int:
            cursor = await conn.execute(Q["group_size"], _params(group))
            row = await cursor.fetchone()
            return int(row["total"]) if row else 0

        return await self._db.read(run)

    async def spread(self, groups: Sequence[SpreadGroup]) -> int:
        async def run(conn: Conn) -> tuple[int, datetime | None]:
            moved, earliest = 0, None
            for group in groups:
                cursor = await conn.execute(Q["spread_group"], _params(group))
                row = await cursor.fetchone()
                count: int = row["moved"] if row else 0
                first: datetime | None = row["earliest"] if row else None
                moved += count
                if first is not None and (earliest is None or first < earliest):
                    earliest = first
            return moved, earliest

        if not groups:
            return 0
        moved, earliest = await self._db.write(run)
        if earliest is not None:
            await self._notices.notify_committed(earliest)
            self._notices.here(earliest)
        return moved


def _params(group: SpreadGroup) -> dict[str, object]:
    return {
        "namespace": group.namespace,
        "type": group.type,
        "due_at": group.due_at,
        "window": group.window,
        "window_us": window_micros(group.window),
    }
