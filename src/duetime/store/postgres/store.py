"""The PostgreSQL store: many workers on many machines, claiming with ``FOR UPDATE SKIP LOCKED``.

Each method is one transaction over a pooled connection (see :mod:`.database`); the SQL lives in
the package's ``.sql`` files, by area, under the method's name. The store is made of parts:
timers are written by :mod:`.writes`, read and acted on by :mod:`.timers`' methods, claimed and
finished by :mod:`.working`'s; namespaces are kept by :mod:`.namespaces`, nodes by
:mod:`.nodes`. Writers that make work due send a ``pg_notify`` right after their commit (inside
a caller's own transaction, as part of it); :mod:`.wakeup` hears it in every process.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from functools import partial

from duetime.model import HeldRow, NewTimer, Node, OnConflict, PutResult, Status
from duetime.store.listeners import WakeupListener
from duetime.store.node_registry import ClockSampler
from duetime.store.postgres.audit import PostgresAudit
from duetime.store.postgres.database import Conn, Database
from duetime.store.postgres.fetching import fetch_value
from duetime.store.postgres.flow_control import PostgresLimits
from duetime.store.postgres.history import PostgresHistory
from duetime.store.postgres.namespaces import PostgresNamespaces
from duetime.store.postgres.nodes import PostgresNodes
from duetime.store.postgres.notices import Notices
from duetime.store.postgres.reach import reach_of
from duetime.store.postgres.schedules import PostgresSchedules
from duetime.store.postgres.schema import migrate, schema_version
from duetime.store.postgres.settings import parse_url
from duetime.store.postgres.sql_access import PostgresSqlAccess
from duetime.store.postgres.timers import PostgresTimers
from duetime.store.postgres.tokens import PostgresTokens
from duetime.store.postgres.transactions import PostgresOutbox, PostgresTransactions
from duetime.store.postgres.wakeup import Listener
from duetime.store.postgres.working import PostgresWorking, claim_params
from duetime.store.postgres.writes import TimerWrites
from duetime.store.queries import load_queries
from duetime.support.sealing import Sealing

Q = load_queries("duetime.store.postgres", "namespaces.sql", "session.sql")


class PostgresStore(PostgresTimers, PostgresWorking):
    """Store backed by PostgreSQL (``synchronous_commit=on``), its tables in one schema."""

    def __init__(self, url: str, *, listen: bool | None = None) -> None:
        """``listen``: hear wake-ups over LISTEN/NOTIFY (default: the URL's ``listen``, true)."""
        self.url = url
        self.settings = parse_url(url)
        self.schema = self.settings.schema
        self._db = Database(self.settings)
        self._notices = Notices(self._db, self.settings.channel)
        self._listen = self.settings.listen if listen is None else listen
        self._listener: Listener | None = None
        self.schedules = PostgresSchedules(self._db, self._notices)
        self.history = PostgresHistory(self._db, self.schema)
        self.tokens = PostgresTokens(self._db)
        self.audit = PostgresAudit(self._db)
        self.limits = PostgresLimits(self._db, claim_params)
        self.transactions = PostgresTransactions(self._db)
        self.writes = TimerWrites(self._db, self._notices)
        self.outbox = PostgresOutbox(self.schema, self.writes.in_savepoint, self._transition_on)
        self.sql_access = PostgresSqlAccess(self._db, self.schema)
        self.namespaces = PostgresNamespaces(self._db, self.schema)
        self.nodes = PostgresNodes(self._db)

    @property
    def sealing(self) -> Sealing:
        """What this store seals at rest, and the ring that opens what it reads."""
        return self._db.sealing

    @sealing.setter
    def sealing(self, sealing: Sealing) -> None:
        self._db.sealing = sealing

    # -- lifecycle --------------------------------------------------------------------------
    async def open(self, *, migrate: bool = True) -> None:
        if self._db.is_open:
            return
        await self._db.open()
        try:
            if migrate:
                await self.migrate()
            else:
                await self._learn_reach()
            if self._listen:
                self._listener = Listener(
                    self.settings.conninfo, self.settings.channel, self._notices.listeners
                )
                await self._listener.start()
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        if self._listener is not None:
            await self._listener.stop()
            self._listener = None
        await self._db.close()

    async def db_now(self) -> datetime | None:
        """The database server's clock, which decides what is due and when leases end."""

        async def run(conn: Conn) -> datetime:
            now: datetime = await fetch_value(conn, Q["db_now"], {})
            return now

        return await self._db.read(run)

    async def change_marker(self) -> str:
        async def run(conn: Conn) -> str:
            marker: str = await fetch_value(conn, Q["change_marker"], {})
            return marker

        return await self._db.read(run)

    def add_wakeup_listener(self, listener: WakeupListener) -> None:
        self._notices.listeners.add(listener)

    def remove_wakeup_listener(self, listener: WakeupListener) -> None:
        self._notices.listeners.remove(listener)

    # -- schema -----------------------------------------------------------------------------
    async def migrate(self) -> list[int]:
        """Apply pending migrations under an advisory lock, so concurrent starters queue up."""
        applied = await self._db.write(lambda conn: migrate(conn, self.schema))
        await self._learn_reach()  # the schema's tables may be new
        return applied

    async def _learn_reach(self) -> None:
        """Where the store's connections lead: callers' transactions must lead there too."""
        self.outbox.reach = await self._db.read(partial(reach_of, schema=self.schema))

    async def schema_version(self) -> int:
        return await self._db.read(lambda conn: schema_version(conn, self.schema))

    # -- namespaces and nodes: the parts' ---------------------------------------------------
    async def ensure_namespace(self, namespace: str, now: datetime) -> None:
        await self.namespaces.ensure_namespace(namespace, now)

    async def namespace_exists(self, namespace: str) -> bool:
        return await self.namespaces.namespace_exists(namespace)

    async def list_namespaces(
        self, after: str = "", limit: int | None = None, only: Sequence[str] | None = None
    ) -> list[str]:
        return await self.namespaces.list_namespaces(after, limit, only)

    async def add_namespaces(
        self, names: Sequence[str], now: datetime, cap: int, field: str
    ) -> list[str]:
        return await self.namespaces.add_namespaces(names, now, cap, field)

    async def expire_leases_of(self, node_id: str, now: datetime) -> int:
        return await self.nodes.expire_leases_of(node_id, now)

    async def namespace_gauges(self) -> dict[str, tuple[dict[Status, int], datetime | None]]:
        return await self.namespaces.namespace_gauges()

    async def count_by_status(self, namespace: str) -> dict[Status, int]:
        return await self.namespaces.count_by_status(namespace)

    async def register_node(self, node: Node) -> None:
        await self.nodes.register_node(node)

    async def heartbeat(
        self,
        node_id: str,
        now: datetime,
        lease_until: datetime,
        held: Sequence[HeldRow],
        clock_offset: timedelta | None = None,
        sample_clock: ClockSampler | None = None,
    ) -> int:
        return await self.nodes.heartbeat(
            node_id, now, lease_until, held, clock_offset, sample_clock
        )

    async def deregister_node(self, node_id: str) -> None:
        await self.nodes.deregister_node(node_id)

    async def list_nodes(self) -> list[Node]:
        return await self.nodes.list_nodes()

    # -- scheduling -------------------------------------------------------------------------
    async def put_timers(
        self, timers: Iterable[NewTimer], on_conflict: OnConflict, now: datetime
    ) -> list[PutResult]:
        """Store timers in one transaction. A small batch (up to PUT_CHUNK timers) that arrives
        while another is committing waits and shares the next commit with every batch that
        queued meanwhile (:mod:`.grouping`); a larger one has a transaction of its own. How a
        batch is written is :mod:`.writes`'."""
        return await self.writes.put_timers(timers, on_conflict, now)
