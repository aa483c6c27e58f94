"""A PostgreSQL store's nodes: each process registers, beats its heart (extending the leases it
holds, in the same transaction) and leaves, and a node known to be gone has its leases ended.

The SQL lives in ``nodes.sql`` (and ``outcomes.sql``) under each method's name. This is the
store's ``nodes`` part, whose methods the store's own forward to (the
:class:`~duetime.store.node_registry.NodeRegistry` side of the Store)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from duetime.model import HeldRow, Node
from duetime.store.node_registry import ClockSampler
from duetime.store.postgres.database import Conn, Database
from duetime.store.postgres.fetching import fetch_all, fetch_value
from duetime.store.postgres.rows import node_from_row, node_params, offset_ms
from duetime.store.queries import load_queries

Q = load_queries("duetime.store.postgres", "nodes.sql", "outcomes.sql", "session.sql")


class PostgresNodes:
    """The nodes registered in one PostgreSQL schema."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def register_node(self, node: Node) -> None:
        params = node_params(node)
        await self._db.read(lambda conn: conn.execute(Q["register_node"], params))

    async def heartbeat(
        self,
        node_id: str,
        now: datetime,
        lease_until: datetime,
        held: Sequence[HeldRow],
        clock_offset: timedelta | None = None,
        sample_clock: ClockSampler | None = None,
    ) -> int:
        params = {
            "node_id": node_id,
            "now": now,
            "lease_until": lease_until,
            "in_flight": len(held),
            "held": [timer_id for timer_id, _ in held],
            "tokens": [token for _, token in held],
            "clock_offset_ms": offset_ms(clock_offset),
        }

        async def run(conn: Conn) -> int:
            if sample_clock is not None:  # first: the round trip timed is this read's alone
                await sample_clock(lambda: fetch_value(conn, Q["db_now"], {}))
            await conn.execute(Q["heartbeat_node"], params)
            return (await conn.execute(Q["extend_leases"], params)).rowcount

        return await self._db.write(run, lane="heartbeat")

    async def deregister_node(self, node_id: str) -> None:
        await self._db.read(lambda conn: conn.execute(Q["deregister_node"], {"node_id": node_id}))

    async def list_nodes(self) -> list[Node]:
        async def run(conn: Conn) -> list[Node]:
            return [node_from_row(row) for row in await fetch_all(conn, Q["list_nodes"], {})]

        return await self._db.read(run)

    async def expire_leases_of(self, node_id: str, now: datetime) -> int:
        params = {"node_id": node_id, "now": now}

        async def run(conn: Conn) -> int:
            return (await conn.execute(Q["expire_leases_of"], params)).rowcount

        return await self._db.read(run)
