"""Transactions shared with user code on PostgreSQL: transactional handlers and the outbox.

A transactional handler's writes commit with its timer's completion (exactly-once effects): in
a transaction of the store's own, or of the caller's connection (a web framework's); the outbox
stores timers inside the caller's own open transaction, so they exist only if it commits.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.rows import DictRow, dict_row

from duetime.errors import InvalidInput
from duetime.model import Finish, NewTimer, OnConflict, Outcome, PutResult
from duetime.store.parts import TransactionEffect
from duetime.store.postgres.database import Conn, Database, fetch_all, fetch_value
from duetime.store.postgres.rows import FinishBatch
from duetime.store.queries import load_queries

Q = load_queries("duetime.store.postgres")
MIN_TRANSACTION_SECONDS = 1.0
"""A transactional handler's least time, even when its lease is (nearly) spent."""
SERVER_GRACE_SECONDS = 1.0
"""The server's limit on such a transaction is this much longer than the client's own, so a
live process ends it cleanly first; the server's ends the transaction of a stalled one."""

_OPEN = (TransactionStatus.INTRANS, TransactionStatus.IDLE)
"""A blocking connection out of autocommit begins its transaction with its next statement."""

PutOn = Callable[[Conn, str, Iterable[NewTimer], OnConflict, datetime], Awaitable[list[PutResult]]]
"""The store's own batch write in a savepoint of a given connection (query, timers, rule)."""


class PostgresTransactions:
    """The :class:`~duetime.store.parts.TransactionStore` of a PostgreSQL schema."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def complete_in_transaction(
        self,
        timer_id: int,
        attempt: int,
        node_id: str,
        now: datetime,
        effect: TransactionEffect,
    ) -> bool:
        """Run a handler's writes and mark its timer done in one transaction (exactly-once).

        The attempt's row is locked first; if it is no longer ours nothing runs and False comes
        back. ``effect`` receives the connection (an ``AsyncConnection`` with dict rows).

        While the row is locked its lease cannot be renewed and rescue skips it, so the
        transaction gets the lease it has left (at least :data:`MIN_TRANSACTION_SECONDS`): an
        async effect still running then is cancelled (TimeoutError; the writes roll back and
        the attempt fails like any handler), and the server ends the transaction of a process
        that stalled altogether a moment later, which frees the row for rescue.
        """
        batch = FinishBatch.of([Finish(timer_id, attempt, Outcome.DONE)], node_id, now)

        async def run(conn: Conn) -> bool:
            params = {"timer_id": timer_id, "attempt": attempt, "node_id": node_id}
            locked = await fetch_all(conn, Q["lock_attempt"], params)
            if not locked:
                return False
            seconds = max(locked[0]["lease_left_ms"] / 1000, MIN_TRANSACTION_SECONDS)
            server_ms = round((seconds + SERVER_GRACE_SECONDS) * 1000)
            await fetch_all(conn, Q["limit_transaction"], {"ms": str(server_ms)})
            result = effect(conn)
            if inspect.isawaitable(result):
                try:
                    async with asyncio.timeout(seconds) as limit:
                        await result
                except TimeoutError:
                    if not limit.expired():
                        raise  # the handler's own
                    raise TimeoutError(
                        f"the transactional handler was still running when its lease ran out "
                        f"({seconds:.1f} s); its writes were rolled back"
                    ) from None
            (answer,) = await fetch_all(conn, Q["finish"], batch.params)
            return not batch.lost(answer["applied"])

        return await self._db.write(run)


class PostgresOutbox:
    """The :class:`~duetime.store.parts.OutboxStore` of a PostgreSQL schema."""

    def __init__(self, schema: str, put: PutOn) -> None:
        self.schema = schema
        self._put = put

    async def put_timers_in(
        self,
        connection: object,
        timers: Iterable[NewTimer],
        on_conflict: OnConflict,
        now: datetime,
    ) -> list[PutResult]:
        """Store timers inside the caller's own open transaction (the outbox pattern).

        They become visible, and wake workers (the NOTIFY is part of the transaction), only if
        the caller commits; a rollback takes them away with the caller's own writes.
        """
        if not isinstance(connection, psycopg.AsyncConnection):
            raise InvalidInput(
                "transaction", "must be a psycopg.AsyncConnection inside an open transaction"
            )
        if connection.info.transaction_status != TransactionStatus.INTRANS:
            raise InvalidInput(
                "transaction", "has no open transaction: start one before scheduling in it"
            )
        query = Q["upsert_timer"] if on_conflict == "update" else Q["insert_timer"]
        conn: Conn = connection
        saved = await fetch_value(conn, Q["current_search_path"], {})
        await fetch_value(conn, Q["set_search_path"], {"search_path": self.schema})
        try:
            # In a savepoint: the batch goes out in chunks, and one refused half-way (a bad
            # request, a key that exists with on_conflict="error") must leave none of its rows in
            # the caller's transaction, which carries on as it was.
            return await self._put(conn, query, timers, on_conflict, now)
        finally:
            await fetch_value(conn, Q["set_search_path"], {"search_path": saved})


def complete_in_callers_transaction(
    connection: psycopg.Connection[Any],
    schema: str,
    timer_id: int,
    attempt: int,
    node_id: str,
    now: datetime,
    effect: Callable[[], None],
) -> bool:
    """:meth:`PostgresTransactions.complete_in_transaction` inside a transaction the caller
    opened on a blocking psycopg connection of its own (a web framework's, whose ORM writes
    must commit with the completion); the caller commits, or rolls back on an exception.

    duetime's statements run under ``schema`` and the caller's ``search_path`` is back for
    ``effect``. A blocking effect cannot be cancelled: when the lease runs out the server ends
    the transaction (the caller's next statement fails and everything rolls back).
    """
    if connection.autocommit or connection.info.transaction_status not in _OPEN:
        raise InvalidInput("transaction", "has no open transaction to complete the timer in")
    params = {"timer_id": timer_id, "attempt": attempt, "node_id": node_id}
    with _in_schema(connection, schema) as cur:
        locked = cur.execute(Q["lock_attempt"], params).fetchall()
        if not locked:
            return False
        seconds = max(locked[0]["lease_left_ms"] / 1000, MIN_TRANSACTION_SECONDS)
        server_ms = round((seconds + SERVER_GRACE_SECONDS) * 1000)
        cur.execute(Q["limit_transaction"], {"ms": str(server_ms)})
    effect()
    batch = FinishBatch.of([Finish(timer_id, attempt, Outcome.DONE)], node_id, now)
    with _in_schema(connection, schema) as cur:
        (answer,) = cur.execute(Q["finish"], batch.params).fetchall()
    return not batch.lost(answer["applied"])


@contextmanager
def _in_schema(
    connection: psycopg.Connection[Any], schema: str
) -> Iterator[psycopg.Cursor[DictRow]]:
    """A cursor whose statements see ``schema``; the connection's own search_path after."""
    # A plain (server-binding) cursor whatever the connection's cursor_factory: finish sends
    # its arrays in binary.
    with psycopg.Cursor(connection, row_factory=dict_row) as cur:
        row = cur.execute(Q["current_search_path"]).fetchone()
        saved = None if row is None else row["search_path"]
        cur.execute(Q["set_search_path"], {"search_path": schema})
        yield cur
        cur.execute(Q["set_search_path"], {"search_path": saved})  # (a failed one rolls back)
