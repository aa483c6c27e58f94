"""A PostgreSQL store's stored timers as operators see them: reads, listings, and what an
operator does to one timer or to many (cancel, replay, run now, delete, bulk actions).

:class:`PostgresTimers` is a part of :class:`~duetime.store.postgres.store.PostgresStore`
(which writes timers through :mod:`.writes`); the SQL lives in ``timers.sql`` under each
method's name.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime
from functools import partial

from psycopg.rows import DictRow

from duetime.model import (
    Attempt,
    BulkAction,
    DeadType,
    Page,
    Timer,
    TimerFilter,
)
from duetime.model.finding import TimerSort
from duetime.store.cursors import (
    TYPES_SCAN,
    bulk_params,
    page,
    sorted_cursor,
    timer_listing,
)
from duetime.store.postgres.database import Conn, Database
from duetime.store.postgres.fetching import fetch_all, fetch_json_as_text, fetch_value
from duetime.store.postgres.notices import Notices
from duetime.store.postgres.resealing import reseal_rows
from duetime.store.postgres.rows import attempt_from_row, timer_from_row, timer_from_text_row
from duetime.store.queries import load_queries
from duetime.store.transitions import Transition, refused

Q = load_queries("duetime.store.postgres", "timers.sql", "session.sql")
_BULK_QUERIES = {
    (False, False): ("bulk_batch", "bulk_count"),
    (False, True): ("bulk_keys", "count_keys"),
    (True, False): ("delete_candidates", "count_deletable"),
    (True, True): ("delete_key_candidates", "count_deletable_keys"),
}
"""A bulk action's batch and count queries, by (is it a delete, is it a selection of keys): a
delete takes archived timers too, a selection goes through the key index."""


class PostgresTimers:
    """Stored timers: read, listed, acted on. Each method is one transaction (see
    :mod:`.database`); what makes a timer due sends a NOTIFY (:mod:`.notices`)."""

    _db: Database
    _notices: Notices

    async def get_timer(self, namespace: str, key: str) -> Timer | None:
        async def run(conn: Conn) -> Timer | None:
            rows = await fetch_all(conn, Q["get_timer"], {"namespace": namespace, "key": key})
            return timer_from_row(rows[0], self._db.sealing) if rows else None

        return await self._db.read(run)

    async def list_timers(
        self,
        namespace: str,
        filter: TimerFilter,
        cursor: str | None,
        limit: int,
        sort: TimerSort = "newest",
    ) -> Page[Timer]:
        params = timer_listing(namespace, filter, cursor, limit, sort=sort)
        query = Q["list_timers" if sort == "newest" else f"list_timers_by_{sort}"]

        async def run(conn: Conn) -> list[DictRow]:
            return await fetch_json_as_text(conn, query, params)

        rows = await self._db.read(run)
        # Decoding the page's payloads is Python work: on a thread, so the event loop serves
        # the other requests meanwhile (the request's page_bytes goes with it). Sealed payloads
        # and errors are opened in that same step, only for the rows the page keeps; its
        # page_bytes counts the rows' text as stored (sealed: longer than what the page shows),
        # which is what was fetched and what opening them costs.
        cursor_of = partial(sorted_cursor, sort)
        timer_of = partial(timer_from_text_row, sealing=self._db.sealing)
        return await asyncio.to_thread(page, rows, limit, timer_of, cursor_of)

    async def reseal(self, after: int, limit: int) -> tuple[int, int | None]:
        """Re-seal up to ``limit`` timers of the hot table after id ``after`` to the first key
        (see :mod:`duetime.store.resealing`; the archived ones are the history's): the values
        changed, and the last id read (None: done)."""
        sealing = self._db.sealing

        async def run(conn: Conn) -> tuple[int, int | None]:
            rows = await fetch_all(conn, Q["reseal_scan"], {"after": after, "limit": limit})
            if not rows:
                return 0, None
            ids = [row["id"] for row in rows]
            attempts = await fetch_all(conn, Q["reseal_attempts_scan"], {"ids": ids})
            return await reseal_rows(conn, sealing, rows, attempts, Q, ""), ids[-1]

        return await self._db.write(run)

    async def list_types(self, namespace: str, prefix: str, limit: int) -> list[str]:
        params = {"namespace": namespace, "prefix": prefix, "limit": limit, "scan": TYPES_SCAN}

        async def run(conn: Conn) -> list[str]:
            return [row["type"] for row in await fetch_all(conn, Q["list_types"], params)]

        return await self._db.read(run)

    async def list_attempts(self, timer_id: int) -> list[Attempt]:
        async def run(conn: Conn) -> list[Attempt]:
            rows = await fetch_all(conn, Q["list_attempts"], {"timer_id": timer_id})
            return [attempt_from_row(row, self._db.sealing) for row in rows]

        return await self._db.read(run)

    async def cancel(self, namespace: str, key: str, now: datetime) -> Timer:
        return await self._transition("cancel", namespace, key, now)

    async def replay(self, namespace: str, key: str, now: datetime) -> Timer:
        timer = await self._transition("replay", namespace, key, now)
        self._notices.here(timer.run_at)
        return timer

    async def run_now(self, namespace: str, key: str, now: datetime) -> Timer:
        timer = await self._transition("run_now", namespace, key, now)
        self._notices.here(timer.run_at)
        return timer

    async def delete(self, namespace: str, key: str, now: datetime) -> Timer:
        params = {"namespace": namespace, "key": key}

        async def run(conn: Conn) -> Timer:
            rows = await fetch_all(conn, Q["delete_timer"], params)
            if rows:
                return timer_from_row(rows[0], self._db.sealing)
            existing = await fetch_all(conn, Q["get_timer"], params)
            raise refused("delete", key, existing[0]["status"] if existing else None)

        return await self._db.write(run)

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
            **bulk_params(namespace, action, filter, now, lambda instant: instant, list, keys),
            "after_id": after_id,
            "limit": limit,
        }
        query = Q[_BULK_QUERIES[action == "delete", keys is not None][0]]
        wakes = action in ("replay", "run_now")

        async def run(conn: Conn) -> tuple[int, int | None]:
            await conn.execute(Q["walk_in_index_order"])  # else each batch re-reads the rest
            ids = [row["id"] for row in await fetch_all(conn, query, params)]
            if not ids:
                return 0, None
            change = {"ids": ids, "now": now, "namespace": namespace}
            if action == "delete":
                changed: int = await fetch_value(conn, Q["bulk_delete"], change)
            else:
                changed = (await conn.execute(Q[f"bulk_{action}"], change)).rowcount
            if changed and wakes:
                await self._notices.notify(conn, now)
            return changed, ids[-1]

        changed, last = await self._db.write(run)
        if changed and wakes:
            self._notices.here(now)
        return changed, last

    async def dead_types(self, namespace: str, limit: int) -> list[DeadType]:
        params = {"namespace": namespace, "limit": limit}

        async def run(conn: Conn) -> list[DeadType]:
            rows = await fetch_all(conn, Q["dead_types"], params)
            return [
                DeadType(row["type"], row["count"], row["newest_at"], row["newest_error"])
                for row in rows
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
        params = bulk_params(namespace, action, filter, now, lambda instant: instant, list, keys)
        query = Q[_BULK_QUERIES[action == "delete", keys is not None][1]]

        async def run(conn: Conn) -> int:
            count: int = await fetch_value(conn, query, params)
            return count

        return await self._db.read(run)

    async def _transition(self, name: Transition, namespace: str, key: str, now: datetime) -> Timer:
        """Cancel or replay one timer; NotFound / Conflict name the key."""
        return await self._db.write(
            lambda conn: self._transition_on(conn, name, namespace, key, now)
        )

    async def _transition_on(
        self, conn: Conn, name: Transition, namespace: str, key: str, now: datetime
    ) -> Timer:
        """:meth:`_transition` on a given connection (the store's, or a caller's: the outbox)."""
        params = {"namespace": namespace, "key": key, "now": now}
        rows = await fetch_all(conn, Q[name], params)
        if rows:
            timer = timer_from_row(rows[0], self._db.sealing)
            if name != "cancel":
                await self._notices.notify(conn, timer.run_at)
            return timer
        existing = await fetch_all(conn, Q["get_timer"], params)
        raise refused(name, key, existing[0]["status"] if existing else None)
