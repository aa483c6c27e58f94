"""The embedded SQLite store: one file in WAL mode, safe for several processes on one machine.

Timers are written and read here, each method one call on the file's connection thread (see
:mod:`.database`: group commit, cross-process wake-ups); what workers do to them (claims,
outcomes, rescues, nodes) is :mod:`.working`'s; the parts — schedules, history, tokens,
transactional handlers, the outbox — are objects of their own on the same database.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from datetime import datetime
from functools import partial

from duetime.model import (
    Attempt,
    BulkAction,
    DeadType,
    NewTimer,
    OnConflict,
    Page,
    PutResult,
    Status,
    Timer,
    TimerFilter,
)
from duetime.model.finding import TimerSort
from duetime.store.codec import dump_json, from_micros, maybe_from_micros, to_micros
from duetime.store.cursors import (
    TYPES_SCAN,
    bulk_params,
    page,
    sorted_cursor,
    timer_listing,
)
from duetime.store.gauges import gauges
from duetime.store.listeners import WakeupListener
from duetime.store.queries import load_queries
from duetime.store.resealing import attempt_writes, timer_writes
from duetime.store.room import check_namespace_room
from duetime.store.run_windows import SpreadStore
from duetime.store.sqlite.audit import SqliteAudit
from duetime.store.sqlite.database import SqliteDatabase, path_from_url
from duetime.store.sqlite.deadlines import SqliteDeadlines
from duetime.store.sqlite.deletes import delete_ids, delete_key
from duetime.store.sqlite.flow_control import SqliteLimits
from duetime.store.sqlite.history import SqliteHistory
from duetime.store.sqlite.outbox import SqliteOutbox
from duetime.store.sqlite.rows import (
    attempt_from_row,
    timer_from_row,
)
from duetime.store.sqlite.schedules import SqliteSchedules
from duetime.store.sqlite.schema import migrate, schema_version
from duetime.store.sqlite.spreads import SqliteSpreads
from duetime.store.sqlite.tokens import SqliteTokens
from duetime.store.sqlite.transactions import SqliteTransactions
from duetime.store.sqlite.working import SqliteWorking, claim_params
from duetime.store.sqlite.writes import earliest_written, timer_rows, transition, write_timers
from duetime.store.transitions import Transition
from duetime.support.sealing import Sealing

Q = load_queries("duetime.store.sqlite", "namespaces.sql", "timers.sql")


def reseal_rows(
    conn: sqlite3.Connection,
    sealing: Sealing,
    rows: list[sqlite3.Row],
    attempts: list[sqlite3.Row],
    payload_query: str = Q["reseal_payload"],
) -> int:
    """Write a rotation batch's re-sealed values; how many were written."""
    payloads, errors = timer_writes(sealing, rows)
    changed = sum(conn.execute(payload_query, w).rowcount for w in payloads)
    changed += sum(conn.execute(Q["reseal_last_error"], w).rowcount for w in errors)
    for write in attempt_writes(sealing, attempts):
        query = Q[
            "reseal_attempt_error" if write["column"] == "error" else "reseal_attempt_traceback"
        ]
        changed += conn.execute(query, write).rowcount
    return changed


class SqliteStore(SqliteWorking):
    """Store backed by one SQLite file (WAL, ``synchronous=FULL``)."""

    def __init__(self, url: str, *, busy_timeout: float = 30.0) -> None:
        self.url = url
        self.path = path_from_url(url)
        self._db = SqliteDatabase(self.path, busy_timeout=busy_timeout)
        self.schedules = SqliteSchedules(self._db)
        self.history = SqliteHistory(self._db)
        self.tokens = SqliteTokens(self._db)
        self.audit = SqliteAudit(self._db)
        self.deadlines = SqliteDeadlines(self._db)
        self.spreads: SpreadStore = SqliteSpreads(self._db)
        self.limits = SqliteLimits(self._db, claim_params)
        self.transactions = SqliteTransactions(self._db)
        self.outbox = SqliteOutbox(self._db)
        self.sql_access = None  # the SQL functions are PostgreSQL's

    @property
    def sealing(self) -> Sealing:
        """What this store seals at rest, and the ring that opens what it reads."""
        return self._db.sealing

    @sealing.setter
    def sealing(self, sealing: Sealing) -> None:
        self._db.sealing = sealing

    async def open(self, *, migrate: bool = True) -> None:
        if self._db.is_open:
            return
        await self._db.open()
        if migrate:
            await self.migrate()
        await self.schedules.hear_releases()
        await self._db.listen()

    async def close(self) -> None:
        await self._db.close()

    async def change_marker(self) -> str:
        def run(conn: sqlite3.Connection) -> str:
            version = conn.execute(Q["data_version"]).fetchone()[0]
            return f"{version}.{conn.total_changes}"

        return await self._db.read(run)

    def add_wakeup_listener(self, listener: WakeupListener) -> None:
        self._db.listeners.add(listener)

    def remove_wakeup_listener(self, listener: WakeupListener) -> None:
        self._db.listeners.remove(listener)

    # -- schema -----------------------------------------------------------------------------
    async def migrate(self) -> list[int]:
        return await self._db.read(migrate)

    async def schema_version(self) -> int:
        return await self._db.read(schema_version)

    async def db_now(self) -> datetime | None:
        """None: the database is a file on this machine, whose wall clock every process shares
        (so no process can be skewed against another)."""
        return None

    # -- namespaces -------------------------------------------------------------------------
    async def ensure_namespace(self, namespace: str, now: datetime) -> None:
        def run(conn: sqlite3.Connection) -> None:
            conn.execute(Q["ensure_namespace"], (namespace, to_micros(now)))

        await self._db.read(run)

    async def namespace_exists(self, namespace: str) -> bool:
        def run(conn: sqlite3.Connection) -> bool:
            return conn.execute(Q["namespace_exists"], (namespace,)).fetchone() is not None

        return await self._db.read(run)

    async def list_namespaces(
        self, after: str = "", limit: int | None = None, only: Sequence[str] | None = None
    ) -> list[str]:
        params = {
            "after": after,
            "limit": limit,
            "only": None if only is None else dump_json(list(only)),
        }
        return await self._db.read(
            lambda c: [row[0] for row in c.execute(Q["list_namespaces"], params)]
        )

    async def add_namespaces(
        self, names: Sequence[str], now: datetime, cap: int, field: str
    ) -> list[str]:
        given = dump_json(list(dict.fromkeys(names)))

        def run(conn: sqlite3.Connection) -> list[str]:
            (held,) = conn.execute(Q["namespaces_held"], {"up_to": cap}).fetchone()
            new = [row[0] for row in conn.execute(Q["namespaces_new"], {"names": given})]
            check_namespace_room(int(held), len(new), cap, field)
            conn.executemany(Q["ensure_namespace"], [(name, to_micros(now)) for name in new])
            return new

        return await self._db.write(run)

    # -- scheduling -------------------------------------------------------------------------
    async def put_timers(
        self, timers: Iterable[NewTimer], on_conflict: OnConflict, now: datetime
    ) -> list[PutResult]:
        timers = list(timers)  # every request validated before the write lock is taken
        rows = timer_rows(timers, now, self._db.sealing)
        results = await self._db.write(
            lambda conn: write_timers(conn, timers, rows, on_conflict, self._db.sealing)
        )
        earliest = earliest_written(results)
        if earliest is not None:
            self._db.announce(earliest)
        return results

    async def get_timer(self, namespace: str, key: str) -> Timer | None:
        def run(conn: sqlite3.Connection) -> Timer | None:
            row = conn.execute(Q["get_timer"], (namespace, key)).fetchone()
            return None if row is None else timer_from_row(row, self._db.sealing)

        return await self._db.read(run)

    async def list_timers(
        self,
        namespace: str,
        filter: TimerFilter,
        cursor: str | None,
        limit: int,
        sort: TimerSort = "newest",
    ) -> Page[Timer]:
        params = timer_listing(namespace, filter, cursor, limit, to_micros, json.dumps, sort)
        query = Q["list_timers" if sort == "newest" else f"list_timers_by_{sort}"]

        def run(conn: sqlite3.Connection) -> Page[Timer]:
            rows = conn.execute(query, params).fetchall()
            return page(
                rows,
                limit,
                partial(timer_from_row, sealing=self._db.sealing),
                partial(sorted_cursor, sort),
            )

        return await self._db.read(run)

    async def reseal(self, after: int, limit: int) -> tuple[int, int | None]:
        """Re-seal up to ``limit`` timers after id ``after`` to the first key (see
        :mod:`duetime.store.resealing`): the values changed, and the last id read (None: done)."""
        sealing = self._db.sealing

        def run(conn: sqlite3.Connection) -> tuple[int, int | None]:
            rows = conn.execute(Q["reseal_scan"], {"after": after, "limit": limit}).fetchall()
            if not rows:
                return 0, None
            ids = dump_json([row["id"] for row in rows])
            attempts = conn.execute(Q["reseal_attempts_scan"], {"ids": ids}).fetchall()
            return reseal_rows(conn, sealing, rows, attempts), rows[-1]["id"]

        return await self._db.write(run)

    async def list_types(self, namespace: str, prefix: str, limit: int) -> list[str]:
        params = {"namespace": namespace, "prefix": prefix, "limit": limit, "scan": TYPES_SCAN}

        def run(conn: sqlite3.Connection) -> list[str]:
            return [row[0] for row in conn.execute(Q["list_types"], params)]

        return await self._db.read(run)

    async def list_attempts(self, timer_id: int) -> list[Attempt]:
        def run(conn: sqlite3.Connection) -> list[Attempt]:
            return [
                attempt_from_row(row, self._db.sealing)
                for row in conn.execute(Q["list_attempts"], (timer_id,))
            ]

        return await self._db.read(run)

    async def count_by_status(self, namespace: str) -> dict[Status, int]:
        def run(conn: sqlite3.Connection) -> dict[Status, int]:
            counts = dict.fromkeys(Status, 0)
            for status, count in conn.execute(Q["count_by_status"], (namespace,)):
                counts[Status(status)] = count
            return counts

        return await self._db.read(run)

    async def namespace_gauges(self) -> dict[str, tuple[dict[Status, int], datetime | None]]:
        def run(conn: sqlite3.Connection) -> dict[str, tuple[dict[Status, int], datetime | None]]:
            counts = conn.execute(Q["gauge_counts"]).fetchall()
            earliest = conn.execute(Q["gauge_earliest"]).fetchall()
            return gauges(
                counts, ((name, None if at is None else from_micros(at)) for name, at in earliest)
            )

        return await self._db.read(run)

    async def cancel(self, namespace: str, key: str, now: datetime) -> Timer:
        return await self._transition("cancel", namespace, key, now)

    async def replay(self, namespace: str, key: str, now: datetime) -> Timer:
        timer = await self._transition("replay", namespace, key, now)
        self._db.announce(timer.run_at)
        return timer

    async def run_now(self, namespace: str, key: str, now: datetime) -> Timer:
        timer = await self._transition("run_now", namespace, key, now)
        self._db.announce(timer.run_at)
        return timer

    async def delete(self, namespace: str, key: str, now: datetime) -> Timer:
        return await self._db.write(
            lambda conn: delete_key(conn, namespace, key, now, self._db.sealing)
        )

    async def bulk_batch(
        self,
        namespace: str,
        action: BulkAction,
        filter: TimerFilter,
        after_id: int,
        now: datetime,
        limit: int,
        keys: Sequence[str] | None = None,
    ) -> tuple[int, int | None]:
        params = {
            **bulk_params(namespace, action, filter, now, to_micros, json.dumps, keys),
            "after_id": after_id,
            "limit": limit,
        }
        query = Q["bulk_batch" if keys is None else "bulk_keys"]

        def run(conn: sqlite3.Connection) -> tuple[int, int | None]:
            ids = [row[0] for row in conn.execute(query, params)]
            if not ids:
                return 0, None
            if action == "delete":
                return delete_ids(conn, ids, now), ids[-1]
            change = {"ids": json.dumps(ids), "now": to_micros(now)}
            return conn.execute(Q[f"bulk_{action}"], change).rowcount, ids[-1]

        changed, last = await self._db.write(run)
        if changed and action in ("replay", "run_now"):
            self._db.announce(now)
        return changed, last

    async def dead_types(self, namespace: str, limit: int) -> list[DeadType]:
        params = {"namespace": namespace, "limit": limit}

        def run(conn: sqlite3.Connection) -> list[DeadType]:
            return [
                DeadType(row[0], row[1], maybe_from_micros(row[2]), row[3])
                for row in conn.execute(Q["dead_types"], params)
            ]

        return await self._db.read(run)

    async def count_matching(
        self,
        namespace: str,
        action: BulkAction,
        filter: TimerFilter,
        now: datetime,
        keys: Sequence[str] | None = None,
    ) -> int:
        params = bulk_params(namespace, action, filter, now, to_micros, json.dumps, keys)
        query = Q["bulk_count" if keys is None else "count_keys"]

        def run(conn: sqlite3.Connection) -> int:
            count: int = conn.execute(query, params).fetchone()[0]
            return count

        return await self._db.read(run)

    async def _transition(self, name: Transition, namespace: str, key: str, now: datetime) -> Timer:
        return await self._db.write(
            lambda conn: transition(conn, name, namespace, key, now, self._db.sealing)
        )
