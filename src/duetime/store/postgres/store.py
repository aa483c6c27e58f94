"""The PostgreSQL store: many workers on many machines, claiming with ``FOR UPDATE SKIP LOCKED``.

Each method is one transaction over a pooled connection (see :mod:`.database`); the SQL lives in
the package's ``.sql`` files, by area, under the method's name. The store is made of parts:
timers are written by :mod:`.writes`, read and acted on by :mod:`.timers`' methods, claimed and
finished by :mod:`.working`'s. Writers that make work due send a ``pg_notify`` right after
their commit (inside a caller's own transaction, as part of it); :mod:`.wakeup` hears it in
every process.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from functools import partial

from duetime.model import NewTimer, OnConflict, PutResult
from duetime.store.listeners import WakeupListener
from duetime.store.postgres.audit import PostgresAudit
from duetime.store.postgres.database import Conn, Database, fetch_all, fetch_value
from duetime.store.postgres.flow_control import PostgresLimits
from duetime.store.postgres.history import PostgresHistory
from duetime.store.postgres.notices import Notices
from duetime.store.postgres.reach import reach_of
from duetime.store.postgres.schedules import PostgresSchedules
from duetime.store.postgres.schema import migrate, schema_version
from duetime.store.postgres.settings import parse_url
from duetime.store.postgres.spreads import PostgresSpreads
from duetime.store.postgres.sql_access import PostgresSqlAccess
from duetime.store.postgres.timers import PostgresTimers
from duetime.store.postgres.tokens import PostgresTokens
from duetime.store.postgres.transactions import PostgresOutbox, PostgresTransactions
from duetime.store.postgres.wakeup import Listener
from duetime.store.postgres.working import PostgresWorking, claim_params
from duetime.store.postgres.writes import TimerWrites
from duetime.store.queries import load_queries
from duetime.store.room import check_namespace_room
from duetime.store.run_windows import SpreadStore
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
        self.spreads: SpreadStore = PostgresSpreads(self._db, self._notices)
        self.limits = PostgresLimits(self._db, claim_params)
        self.transactions = PostgresTransactions(self._db)
        self.writes = TimerWrites(self._db, self._notices)
        self.outbox = PostgresOutbox(self.schema, self.writes.in_savepoint, self._transition_on)
        self.sql_access = PostgresSqlAccess(self._db, self.schema)

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

    # -- namespaces -------------------------------------------------------------------------
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

    # -- scheduling -------------------------------------------------------------------------
    async def put_timers(
        self, timers: Iterable[NewTimer], on_conflict: OnConflict, now: datetime
    ) -> list[PutResult]:
        """Store timers in one transaction. A small batch (up to PUT_CHUNK timers) that arrives
        while another is committing waits and shares the next commit with every batch that
        queued meanwhile (:mod:`.grouping`); a larger one has a transaction of its own. How a
        batch is written is :mod:`.writes`'."""
        return await self.writes.put_timers(timers, on_conflict, now)
