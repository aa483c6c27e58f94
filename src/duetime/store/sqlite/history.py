"""History in the SQLite file: the :class:`~duetime.store.parts.HistoryStore` part of
:class:`~duetime.store.sqlite.store.SqliteStore`.

One table holds pending work and history alike, so retention is pruning: timers that finished
more than ``retention`` ago are deleted with their attempts, a batch per write transaction, so
claims and finishes of this process and others slip in between batches instead of waiting for
the whole prune. (``archive_after`` is for PostgreSQL's history tables; SQLite has none.)
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from duetime.model import Attempt, Page, Timer
from duetime.model.charts import (
    PERCENTILES,
    LatenessRow,
    ThroughputCount,
    interpolated,
)
from duetime.model.history import (
    ActivityCount,
    EventFilter,
    LoggedEvent,
    MaintenanceReport,
    RetentionPolicy,
)
from duetime.store.codec import dump_json, to_micros
from duetime.store.cursors import (
    decode_event_cursor,
    encode_event_cursor,
    event_cursor,
    within_bytes,
)
from duetime.store.parts import Chart
from duetime.store.queries import load_queries
from duetime.store.sqlite.database import SqliteDatabase
from duetime.store.sqlite.rows import attempt_from_row, timer_from_row
from duetime.support.sealing import Sealing

Q = load_queries("duetime.store.sqlite", "history.sql")

EARLIEST = to_micros(datetime(1, 1, 1, tzinfo=UTC))
LATEST = to_micros(datetime(9999, 12, 31, tzinfo=UTC))
MAX_ID = 2**63 - 1


class SqliteHistory:
    """Pruning and the event log on a SQLite file."""

    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db

    async def maintain(self, policy: RetentionPolicy, now: datetime) -> MaintenanceReport:
        """Delete what finished before ``now - retention``, namespace by namespace."""
        namespaces = await self._db.read(
            lambda conn: [row[0] for row in conn.execute(Q["history_namespaces"])]
        )
        deleted = 0
        for namespace in namespaces:
            deleted += await self._prune(namespace, policy, now)
        return MaintenanceReport(deleted=deleted)

    async def _prune(self, namespace: str, policy: RetentionPolicy, now: datetime) -> int:
        params: dict[str, Any] = {
            "namespace": namespace,
            "delete_before": to_micros(policy.delete_before(now)),
            "after_at": EARLIEST,
            "after_id": 0,
            "limit": policy.batch_size,
        }

        def batch(conn: sqlite3.Connection) -> int | None:
            rows = conn.execute(Q["prune_candidates"], params).fetchall()
            if not rows:
                return None
            params["after_at"], params["after_id"] = rows[-1]["event_at"], rows[-1]["id"]
            ids = dump_json([row["id"] for row in rows])
            return conn.execute(Q["prune_timers"], {"ids": ids}).rowcount

        total = 0
        while (count := await self._db.write(batch)) is not None:
            total += count
        return total

    async def reseal(self, namespace: str, after: int, limit: int) -> tuple[int, int | None]:
        """Nothing: finished timers stay in the one table :meth:`SqliteStore.reseal` walks."""
        return 0, None

    async def list_events(
        self, namespace: str, filter: EventFilter, cursor: str | None, limit: int
    ) -> Page[LoggedEvent]:
        before = decode_event_cursor(cursor)
        params = {
            "namespace": namespace,
            "since": EARLIEST if filter.since is None else to_micros(filter.since),
            "until": LATEST if filter.until is None else to_micros(filter.until),
            "before_at": LATEST if before is None else to_micros(before[0]),
            "before_id": MAX_ID if before is None else before[1],
            # check_pattern allows no GLOB syntax but '*', which means the same in both.
            "type_glob": filter.type,
            "limit": limit + 1,
        }

        def run(conn: sqlite3.Connection) -> Page[LoggedEvent]:
            rows = conn.execute(Q["list_events"], params).fetchall()
            # page_bytes counts the rows' text as stored (sealed: longer than what the page
            # shows); only the rows kept are decoded, their sealed values opened as they are.
            sealing = self._db.sealing
            timers = [timer_from_row(row, sealing) for row in within_bytes(rows[:limit])]
            deliveries = _deliveries(conn, timers, sealing)
            items = [LoggedEvent(t, tuple(deliveries.get(t.id, ()))) for t in timers]
            last = timers[-1] if len(rows) > len(timers) and timers else None
            next_cursor = None
            if last is not None and last.fired_at is not None:
                next_cursor = encode_event_cursor(last.fired_at, last.id)
            return Page(items, next_cursor, event_cursor)

        return await self._db.read(run)

    async def activity(
        self, namespace: str, since: datetime, until: datetime
    ) -> list[ActivityCount]:
        params = {"namespace": namespace, "since": to_micros(since), "until": to_micros(until)}

        def run(conn: sqlite3.Connection) -> list[ActivityCount]:
            return [ActivityCount(*row) for row in conn.execute(Q["activity"], params)]

        return await self._db.read(run)

    async def chart(
        self,
        namespace: str,
        since: datetime,
        until: datetime,
        bucket: timedelta,
        type: str | None,
        node: str | None,
    ) -> Chart:
        params = {
            "namespace": namespace,
            "since": to_micros(since),
            "until": to_micros(until),
            "bucket": bucket // timedelta(microseconds=1),
            "type_glob": type,
            "node": node,
        }

        def run(conn: sqlite3.Connection) -> Chart:
            counts = [ThroughputCount(*row) for row in conn.execute(Q["chart_throughput"], params)]
            lateness = [_lateness(row) for row in conn.execute(Q["chart_lateness"], params)]
            return counts, lateness

        return await self._db.read(run)


def _lateness(row: sqlite3.Row) -> LatenessRow:
    """A bucket's percentiles, interpolated between the ranks the query read."""
    bucket, count = row[0], row[1]
    p50, p95, p99 = (
        interpolated(count, p, row[2 + 2 * n], row[3 + 2 * n]) for n, p in enumerate(PERCENTILES)
    )
    return LatenessRow(bucket, count, p50, p95, p99, row[8])


def _deliveries(
    conn: sqlite3.Connection, timers: Sequence[Timer], sealing: Sealing
) -> dict[int, list[Attempt]]:
    """The attempts of the listed events, by timer id, in number order."""
    if not timers:
        return {}
    found: dict[int, list[Attempt]] = {}
    ids = dump_json([t.id for t in timers])
    for row in conn.execute(Q["list_deliveries"], {"ids": ids}):
        found.setdefault(row["timer_id"], []).append(attempt_from_row(row, sealing))
    return found
