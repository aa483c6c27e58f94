"""History in PostgreSQL: the :class:`~duetime.store.parts.HistoryStore` part of
:class:`~duetime.store.postgres.store.PostgresStore`.

Finished timers move from ``timers`` to ``timer_history`` (and their attempts to
``attempt_history``), tables partitioned by UTC month, so the hot table — the one every claim
and finish rewrites — stays the size of the pending work plus ``archive_after`` of history,
however long the history grows; dropping a month is instant and leaves no bloat behind. Each
batch is one statement with ``FOR UPDATE SKIP LOCKED``, so nodes maintaining at once share the
rows instead of waiting on each other; partitions change under an advisory lock.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from psycopg import sql
from psycopg.errors import LockNotAvailable

from duetime.model import Attempt, Page, Timer
from duetime.model.charts import LatenessRow, ThroughputCount
from duetime.model.history import (
    ActivityCount,
    EventFilter,
    LoggedEvent,
    MaintenanceReport,
    RetentionPolicy,
)
from duetime.store.codec import like_pattern
from duetime.store.cursors import (
    decode_event_cursor,
    encode_event_cursor,
    event_cursor,
    within_bytes,
)
from duetime.store.parts import Chart
from duetime.store.postgres.database import Conn, Database
from duetime.store.postgres.fetching import fetch_all, fetch_json_as_text
from duetime.store.postgres.resealing import reseal_rows
from duetime.store.postgres.rows import attempt_from_row, timer_from_text_row
from duetime.store.queries import load_queries
from duetime.support.sealing import Sealing
from duetime.timemath.durations import add_months, month_start, months_between

Q = load_queries("duetime.store.postgres", "history.sql", "session.sql")
log = logging.getLogger("duetime.store.postgres")

PARENTS = ("timer_history", "attempt_history")
_PARTITION = re.compile(r"(?:timer|attempt)_history_(\d{4})_(\d{2})")
PARTITION_LOCK_TIMEOUT = "2s"
"""Creating or dropping a partition locks its parent table exclusively; past this wait (a long
read of the history holds it) the step is left to the next round, rather than stalling every
reader queued behind it. Months are made ahead, so a late one is never needed at once."""
EARLIEST = datetime(1, 1, 1, tzinfo=UTC)
LATEST = datetime(9999, 12, 31, tzinfo=UTC)
MAX_ID = 2**63 - 1


class PostgresHistory:
    """Retention and the event log in one PostgreSQL schema."""

    def __init__(self, db: Database, schema: str) -> None:
        self._db = db
        self.schema = schema

    # -- maintenance ------------------------------------------------------------------------
    async def maintain(self, policy: RetentionPolicy, now: datetime) -> MaintenanceReport:
        """Partitions first (the archive needs them), then archive, delete, and drop months."""
        existing = await self._partitions()  # read once: both steps decide by it
        created = await self._create_partitions(policy, now, existing)
        archived = deleted = 0
        for namespace in await self._history_namespaces():
            archived += await self._batches("archive_timers", namespace, policy, now)
            deleted += await self._batches("delete_finished", namespace, policy, now)
        dropped = await self._drop_partitions(policy, now, existing)
        return MaintenanceReport(archived, deleted, created, dropped)

    async def _history_namespaces(self) -> list[str]:
        async def run(conn: Conn) -> list[str]:
            return [row["namespace"] for row in await fetch_all(conn, Q["history_namespaces"], {})]

        return await self._db.read(run)

    async def _batches(
        self, query: str, namespace: str, policy: RetentionPolicy, now: datetime
    ) -> int:
        """Run one batch statement until it finds no more rows; how many rows it moved."""
        params: dict[str, Any] = {
            "namespace": namespace,
            "archive_before": policy.archive_before(now),
            "delete_before": policy.delete_before(now),
            "after_at": EARLIEST,
            "after_id": 0,
            "limit": policy.batch_size,
        }
        total = 0

        async def run(conn: Conn) -> int | None:
            await conn.execute(Q["walk_in_index_order"])
            rows = await fetch_all(conn, Q[query], params)
            if not rows:
                return None
            params["after_at"], params["after_id"] = rows[0]["event_at"], rows[0]["id"]
            count: int = rows[0]["count"]
            return count

        while (count := await self._db.write(run)) is not None:
            total += count
        return total

    async def _create_partitions(
        self, policy: RetentionPolicy, now: datetime, existing: set[str]
    ) -> tuple[str, ...]:
        """Every month from the retention's start to ``months_ahead`` after now's, per parent
        (``existing``: the partitions as read before; they are read again under the lock)."""
        last = add_months(month_start(now), policy.months_ahead)
        wanted = [
            (parent, month)
            for month in months_between(policy.delete_before(now), last)
            for parent in PARENTS
        ]
        if all(partition_name(p, m) in existing for p, m in wanted):
            return ()  # the usual case: no lock taken

        async def run(conn: Conn) -> tuple[str, ...]:
            await self._lock_partitions(conn)
            made_elsewhere = await _partitions(conn)  # another node may have just made some
            made = []
            for parent, month in wanted:
                name = partition_name(parent, month)
                if name in made_elsewhere:
                    continue
                statement = sql.SQL(Q["create_partition"]).format(
                    partition=sql.Identifier(name),
                    parent=sql.Identifier(parent),
                    start=sql.Literal(month),
                    end=sql.Literal(add_months(month, 1)),
                )
                if not await _within_lock_timeout(conn, statement, name):
                    break
                made.append(name)
            return tuple(made)

        return await self._db.write(run)

    async def _drop_partitions(
        self, policy: RetentionPolicy, now: datetime, existing: set[str]
    ) -> tuple[str, ...]:
        """Drop the months that ended before the retention's start (all their rows are past it;
        ``existing`` as for :meth:`_create_partitions`)."""
        cutoff = policy.delete_before(now)

        def expired(names: set[str]) -> list[str]:
            return sorted(
                name
                for name in names
                if (start := partition_month(name)) is not None and add_months(start, 1) <= cutoff
            )

        if not expired(existing):
            return ()

        async def run(conn: Conn) -> tuple[str, ...]:
            await self._lock_partitions(conn)
            dropped = []
            for name in expired(await _partitions(conn)):
                statement = sql.SQL(Q["drop_partition"]).format(partition=sql.Identifier(name))
                if not await _within_lock_timeout(conn, statement, name):
                    break
                dropped.append(name)
            return tuple(dropped)

        return await self._db.write(run)

    async def _partitions(self) -> set[str]:
        return await self._db.write(_partitions)  # one transaction, not one per parent

    async def _lock_partitions(self, conn: Conn) -> None:
        """Until the transaction ends, no other node creates or drops partitions here."""
        await conn.execute(Q["lock_partitions"], {"lock": f"duetime:partitions:{self.schema}"})
        await conn.execute(Q["set_lock_timeout"], {"timeout": PARTITION_LOCK_TIMEOUT})

    # -- the event log ----------------------------------------------------------------------
    async def reseal(self, namespace: str, after: int, limit: int) -> tuple[int, int | None]:
        sealing = self._db.sealing
        params = {"namespace": namespace, "after": after, "limit": limit}

        async def run(conn: Conn) -> tuple[int, int | None]:
            rows = await fetch_all(conn, Q["reseal_history_scan"], params)
            if not rows:
                return 0, None
            ids = [row["id"] for row in rows]
            attempts = await fetch_all(conn, Q["reseal_history_attempts_scan"], {"ids": ids})
            return await reseal_rows(conn, sealing, rows, attempts, Q, "history_"), ids[-1]

        return await self._db.write(run)

    async def list_events(
        self, namespace: str, filter: EventFilter, cursor: str | None, limit: int
    ) -> Page[LoggedEvent]:
        before = decode_event_cursor(cursor) or (LATEST, MAX_ID)
        params = {
            "namespace": namespace,
            "since": filter.since or EARLIEST,
            "until": filter.until or LATEST,
            "before_at": before[0],
            "before_id": before[1],
            "type_like": None if filter.type is None else like_pattern(filter.type),
            "limit": limit + 1,
        }

        async def run(conn: Conn) -> Page[LoggedEvent]:
            await conn.execute(Q["walk_in_index_order"])
            rows = await fetch_json_as_text(conn, Q["list_events"], params)
            # page_bytes counts the rows' text as stored (sealed: longer than what the page
            # shows); only the rows kept are decoded, their sealed values opened as they are.
            sealing = self._db.sealing
            timers = [timer_from_text_row(row, sealing) for row in within_bytes(rows[:limit])]
            deliveries = await _deliveries(conn, timers, sealing)
            items = [LoggedEvent(t, tuple(deliveries.get(t.id, ()))) for t in timers]
            last = timers[-1] if len(rows) > len(timers) and timers else None
            next_cursor = None
            if last is not None and last.fired_at is not None:
                next_cursor = encode_event_cursor(last.fired_at, last.id)
            return Page(items, next_cursor, event_cursor)

        return await self._db.write(run)  # one transaction: the plan settings hold for it

    async def activity(
        self, namespace: str, since: datetime, until: datetime
    ) -> list[ActivityCount]:
        params = {"namespace": namespace, "since": since, "until": until}

        async def run(conn: Conn) -> list[ActivityCount]:
            rows = await fetch_all(conn, Q["activity"], params)
            return [
                ActivityCount(
                    row["minute"],
                    row["status"],
                    row["count"],
                    row["lateness_sum_ms"],
                    row["lateness_max_ms"],
                )
                for row in rows
            ]

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
            "since": since,
            "until": until,
            "bucket_seconds": bucket.total_seconds(),
            "type_like": None if type is None else like_pattern(type),
            "node": node,
        }

        async def run(conn: Conn) -> Chart:
            counts = [
                ThroughputCount(row["bucket"], row["status"], row["count"])
                for row in await fetch_all(conn, Q["chart_throughput"], params)
            ]
            lateness = [
                LatenessRow(
                    row["bucket"], row["n"], row["ps"][0], row["ps"][1], row["ps"][2], row["max_ms"]
                )
                for row in await fetch_all(conn, Q["chart_lateness"], params)
            ]
            return counts, lateness

        return await self._db.read(run)


async def _deliveries(
    conn: Conn, timers: Sequence[Timer], sealing: Sealing
) -> dict[int, list[Attempt]]:
    """The attempts of the listed events, by timer id, in number order."""
    fired = [t.fired_at for t in timers if t.fired_at is not None]
    if not fired:
        return {}
    params = {"ids": [t.id for t in timers], "since": min(fired)}
    found: dict[int, list[Attempt]] = {}
    for row in await fetch_all(conn, Q["list_deliveries"], params):
        found.setdefault(row["timer_id"], []).append(attempt_from_row(row, sealing))
    return found


async def _within_lock_timeout(conn: Conn, statement: sql.Composed, name: str) -> bool:
    """Run a partition's DDL in a savepoint; False (nothing done) when its parent table stayed
    locked past the timeout: the step is left to the next round."""
    try:
        async with conn.transaction():
            await conn.execute(statement)
    except LockNotAvailable:
        log.info("history tables busy: %s is left to the next maintenance round", name)
        return False
    return True


async def _partitions(conn: Conn) -> set[str]:
    """The names of the history tables' partitions."""
    names: set[str] = set()
    for parent in PARENTS:
        rows = await fetch_all(conn, Q["list_partitions"], {"parent": parent})
        names.update(row["name"] for row in rows)
    return names


def partition_name(parent: str, month: datetime) -> str:
    return f"{parent}_{month.year:04d}_{month.month:02d}"


def partition_month(name: str) -> datetime | None:
    """The month a partition of ours holds (None for a table that is not one)."""
    match = _PARTITION.fullmatch(name)
    if match is None:
        return None
    return datetime(int(match[1]), int(match[2]), 1, tzinfo=UTC)
