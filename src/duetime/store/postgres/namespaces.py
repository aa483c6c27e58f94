"""A PostgreSQL store's namespaces: made on first use, or several at once under a cap counted
under a lock (so racing creations cannot pass it together); the SQL lives in
``namespaces.sql``. Their timers counted by status (what a metrics scrape reads) are here too.
The store's ``namespaces`` part, whose methods the store's own forward to."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from duetime.model import Status
from duetime.store.gauges import gauges
from duetime.store.postgres.database import Conn, Database
from duetime.store.postgres.fetching import fetch_all
from duetime.store.queries import load_queries
from duetime.store.room import check_namespace_room

Q = load_queries("duetime.store.postgres", "namespaces.sql", "timers.sql")


class PostgresNamespaces:
    """The namespaces of one PostgreSQL schema, and their timers counted by status."""

    def __init__(self, db: Database, schema: str) -> None:
        self._db = db
        self.schema = schema

    async def ensure_namespace(self, namespace: str, now: datetime) -> None:
        params = {"name": namespace, "now": now}
        await self._db.read(lambda conn: conn.execute(Q["ensure_namespace"], params))

    async def namespace_exists(self, namespace: str) -> bool:
        async def run(conn: Conn) -> bool:
            return bool(await fetch_all(conn, Q["namespace_exists"], {"name": namespace}))

        return await self._db.read(run)

    async def list_namespaces(
        self, after: str = "", limit: int | None = None, only: Sequence[str] | None = None
    ) -> list[str]:
        params = {"after": after, "limit": limit, "only": None if only is None else list(only)}

        async def run(conn: Conn) -> list[str]:
            return [row["name"] for row in await fetch_all(conn, Q["list_namespaces"], params)]

        return await self._db.read(run)

    async def add_namespaces(
        self, names: Sequence[str], now: datetime, cap: int, field: str
    ) -> list[str]:
        lock = {"lock": f"duetime:namespaces:{self.schema}"}
        params = {"names": list(dict.fromkeys(names)), "up_to": cap, "now": now}

        async def run(conn: Conn) -> list[str]:
            await conn.execute(Q["lock_namespaces"], lock)
            (room,) = await fetch_all(conn, Q["namespace_room"], params)
            new: list[str] = room["new"]
            check_namespace_room(int(room["held"]), len(new), cap, field)
            for name in new:
                await conn.execute(Q["ensure_namespace"], {"name": name, "now": now})
            return new

        return await self._db.write(run)

    async def namespace_gauges(self) -> dict[str, tuple[dict[Status, int], datetime | None]]:
        async def run(conn: Conn) -> dict[str, tuple[dict[Status, int], datetime | None]]:
            counts = await fetch_all(conn, Q["gauge_counts"], {})
            earliest = await fetch_all(conn, Q["gauge_earliest"], {})
            return gauges(
                ((row["namespace"], row["status"], row["count"]) for row in counts),
                ((row["namespace"], row["earliest"]) for row in earliest),
            )

        return await self._db.read(run)

    async def count_by_status(self, namespace: str) -> dict[Status, int]:
        async def run(conn: Conn) -> dict[Status, int]:
            counts = dict.fromkeys(Status, 0)
            for row in await fetch_all(conn, Q["count_by_status"], {"namespace": namespace}):
                counts[Status(row["status"])] = row["count"]
            return counts

        return await self._db.read(run)
