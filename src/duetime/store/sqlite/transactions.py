"""Transactional handlers on SQLite: their writes and the timer's completion in one transaction.

The handler runs on the store's connection thread inside the write transaction (nothing else of
this process runs meanwhile), so it must be a plain function and short: it holds the file's
write lock.
"""

from __future__ import annotations

import inspect
import sqlite3
from datetime import datetime

from duetime.model import Outcome
from duetime.store.codec import to_micros
from duetime.store.parts import TransactionEffect
from duetime.store.queries import load_queries
from duetime.store.sqlite.database import SqliteDatabase
from duetime.store.sqlite.finishing import apply_finish

Q = load_queries("duetime.store.sqlite", "outcomes.sql")


class SqliteTransactions:
    """The :class:`~duetime.store.parts.TransactionStore` of a SQLite file."""

    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db

    async def complete_in_transaction(
        self,
        timer_id: int,
        attempt: int,
        node_id: str,
        now: datetime,
        effect: TransactionEffect,
        *,
        claim_token: int | None = None,
        started_at: datetime | None = None,
    ) -> bool:
        """Run a handler's writes and mark its timer done in one transaction (exactly-once).

        ``effect`` gets this store's ``sqlite3.Connection`` on the store's own thread, inside the
        write transaction; it must be a plain function (nothing else runs meanwhile).
        """
        params = {
            "timer_id": timer_id,
            "attempt": attempt,
            "node_id": node_id,
            "now": to_micros(now),
            "error": None,
            "traceback": None,
            "outcome": Outcome.DONE.value,
            "claim_token": claim_token,
            "started_at": None if started_at is None else to_micros(started_at),
        }

        def run(conn: sqlite3.Connection) -> bool:
            if conn.execute(Q["owned_attempt"], params).fetchone() is None:
                return False
            result = effect(conn)
            if inspect.isawaitable(result):
                close = getattr(result, "close", None)
                if close is not None:
                    close()
                raise TypeError(
                    "on SQLite a transactional handler must be a plain function, not async"
                )
            return apply_finish(conn, Outcome.DONE, params)

        return await self._db.write(run)
