"""Transactions shared with user code on PostgreSQL: transactional handlers and the outbox.

A transactional handler's writes commit with its timer's completion (exactly-once effects): in
a transaction of the store's own, or of the caller's connection (a web framework's); the outbox
stores timers inside the caller's own open transaction, so they exist only if it commits.
"""

from __future__ import annotations

import asyncio
import inspect
import weakref
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any, cast

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.rows import DictRow, dict_row

from duetime.errors import InvalidInput, StoreUnavailable
from duetime.model import Finish, NewTimer, OnConflict, Outcome, PutResult, Timer
from duetime.store.parts import TransactionEffect
from duetime.store.postgres.bridge import Borrowed, PlainCursors, SyncBridge
from duetime.store.postgres.database import Conn, Database
from duetime.store.postgres.fetching import fetch_all, fetch_value
from duetime.store.postgres.finish_batch import FinishBatch
from duetime.store.postgres.reach import Reach, reach_of, refusal
from duetime.store.queries import load_queries
from duetime.store.transitions import Transition
from duetime.support.sealing import NO_SEALING

Q = load_queries(
    "duetime.store.postgres", "transactions.sql", "outcomes.sql", "session.sql", "writes.sql"
)
MIN_TRANSACTION_SECONDS = 1.0
"""A transactional handler's least time, even when its lease is (nearly) spent."""
SERVER_GRACE_SECONDS = 1.0
"""The server's limit on such a transaction is this much longer than the client's own, so a
live process ends it cleanly first; the server's ends the transaction of a stalled one."""

PutOn = Callable[[Conn, str, Iterable[NewTimer], OnConflict, datetime], Awaitable[list[PutResult]]]
"""The store's own batch write in a savepoint of a given connection (query, timers, rule)."""
TransitionOn = Callable[[Conn, Transition, str, str, datetime], Awaitable[Timer]]
"""The store's own cancel or replay of one timer on a given connection."""


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
        *,
        claim_token: int | None = None,
        started_at: datetime | None = None,
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
        done = Finish(
            timer_id, attempt, Outcome.DONE, claim_token=claim_token, started_at=started_at
        )
        batch = FinishBatch.of([done], node_id, now, self._db.sealing)

        async def run(conn: Conn) -> bool:
            params = {
                "timer_id": timer_id,
                "attempt": attempt,
                "node_id": node_id,
                "claim_token": claim_token,
            }
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
    """The :class:`~duetime.store.parts.OutboxStore` of a PostgreSQL schema.

    It writes through the caller's psycopg connection: an ``AsyncConnection`` as it is, a
    blocking ``Connection`` through :class:`~.bridge.SyncBridge` (the same statements, run in
    the caller's thread). The caller's session is left as it was: duetime's schema is put on
    the search path for the transaction only (``set_config(..., true)``) and the caller's own
    path put back after; the isolation level is never touched (a transaction psycopg has still
    to begin, begins with the caller's own settings at duetime's first statement).

    A connection must reach the app's own database and schema (see :mod:`.reach`), in a
    transaction that may write: anything else is refused naming ``transaction`` before duetime
    writes a row.
    """

    def __init__(self, schema: str, put: PutOn, transition: TransitionOn) -> None:
        self.schema = schema
        self._put = put
        self._transition = transition
        self.reach: Reach | None = None
        """Where the store's own connections lead: learned when the store opens."""
        self._reached: weakref.WeakKeyDictionary[object, Reach] = weakref.WeakKeyDictionary()
        """Where callers' connections lead, each looked at once while it lives."""

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
        query = Q["upsert_timer"] if on_conflict == "update" else Q["insert_timer"]
        conn = joinable(connection)
        saved = await self._enter(conn)
        try:
            # In a savepoint: the batch goes out in chunks, and one refused half-way (a bad
            # request, a key that exists with on_conflict="error") must leave none of its rows in
            # the caller's transaction, which carries on as it was.
            return await self._put(conn, query, timers, on_conflict, now)
        finally:
            await fetch_value(conn, Q["set_search_path"], {"search_path": saved})

    async def cancel_in(self, connection: object, namespace: str, key: str, now: datetime) -> Timer:
        """Cancel a timer inside the caller's open transaction: undone if it rolls back."""
        conn = joinable(connection)
        saved = await self._enter(conn)
        try:
            async with conn.transaction():
                return await self._transition(conn, "cancel", namespace, key, now)
        finally:
            await fetch_value(conn, Q["set_search_path"], {"search_path": saved})

    async def _enter(self, conn: Conn) -> str:
        """Check that ``conn`` reaches the app's schema and may write there, then put that
        schema on the path for this transaction; the caller's path before.

        Reading it is duetime's first statement: a transaction psycopg has yet to begin (autocommit
        off, nothing run yet — a fresh SQLAlchemy session) begins here, as the caller's own
        first statement would have begun it.
        """
        (entered,) = await fetch_all(conn, Q["outbox_enter"], {})
        await self._check_reach(conn)
        if entered["read_only"]:
            raise InvalidInput(
                "transaction",
                "the transaction is read-only (SET TRANSACTION READ ONLY, "
                "default_transaction_read_only, or a standby server): pass one that may write",
            )
        await fetch_value(conn, Q["set_search_path"], {"search_path": own_path(self.schema)})
        return str(entered["search_path"])

    async def _check_reach(self, conn: Conn) -> None:
        """InvalidInput unless ``conn`` reaches the app's own database and schema."""
        if self.reach is None:
            raise StoreUnavailable("the app's PostgreSQL store is not open")
        connection = cast(Borrowed, conn).connection
        caller = self._reached.get(connection)
        if caller is None:
            caller = await reach_of(conn, self.schema)
            self._reached[connection] = caller
        why = refusal(caller, self.reach, self.schema)
        if why is not None:
            raise InvalidInput("transaction", why)


def own_path(schema: str) -> str:
    """duetime's schema alone on the search path, temporary tables after it (they come first
    unless named): a caller's temporary table named like one of duetime's never takes its rows."""
    return f"{schema}, pg_temp"


def joinable(connection: object) -> Conn:
    """The caller's psycopg connection, checked: it holds a transaction duetime can join."""
    # Either way it shows the AsyncConnection methods the outbox uses, with plain cursors.
    if isinstance(connection, psycopg.AsyncConnection):
        conn = cast(Conn, PlainCursors(connection))
    elif isinstance(connection, psycopg.Connection):
        conn = cast(Conn, SyncBridge(connection))
    else:
        raise InvalidInput(
            "transaction",
            "this app's database is PostgreSQL: pass a psycopg connection (or a SQLAlchemy or "
            f"Django one on psycopg 3) to it, not {type(connection).__name__}",
        )
    if connection.closed:
        raise InvalidInput("transaction", "the connection is closed: pass an open one")
    status = conn.info.transaction_status
    if status == TransactionStatus.INTRANS:
        return conn
    if status == TransactionStatus.IDLE and not conn.autocommit:
        return conn  # psycopg begins the transaction at duetime's first statement
    if status == TransactionStatus.IDLE:
        raise InvalidInput(
            "transaction",
            "the connection is in autocommit mode with no open transaction: start one "
            "(with conn.transaction(): …) so the timers commit or roll back with your work",
        )
    if status == TransactionStatus.INERROR:
        raise InvalidInput(
            "transaction", "the transaction has failed (a statement in it raised): roll it back"
        )
    raise InvalidInput(
        "transaction", f"the connection cannot take a statement now ({status.name.lower()})"
    )


def complete_in_callers_transaction(
    connection: psycopg.Connection[Any],
    schema: str,
    timer_id: int,
    attempt: int,
    node_id: str,
    now: datetime,
    effect: Callable[[], None],
    *,
    claim_token: int | None = None,
    started_at: datetime | None = None,
) -> bool:
    """:meth:`PostgresTransactions.complete_in_transaction` inside a transaction the caller
    opened on a blocking psycopg connection of its own (a web framework's, whose ORM writes
    must commit with the completion); the caller commits, or rolls back on an exception.

    duetime's statements run under ``schema`` and the caller's ``search_path`` is back for
    ``effect``. A blocking effect cannot be cancelled: when the lease runs out the server ends
    the transaction (the caller's next statement fails and everything rolls back).
    """
    joinable(connection)  # or InvalidInput saying why not
    params = {
        "timer_id": timer_id,
        "attempt": attempt,
        "node_id": node_id,
        "claim_token": claim_token,
    }
    with _in_schema(connection, schema) as cur:
        locked = cur.execute(Q["lock_attempt"], params).fetchall()
        if not locked:
            return False
        seconds = max(locked[0]["lease_left_ms"] / 1000, MIN_TRANSACTION_SECONDS)
        server_ms = round((seconds + SERVER_GRACE_SECONDS) * 1000)
        cur.execute(Q["limit_transaction"], {"ms": str(server_ms)})
    effect()
    done = Finish(timer_id, attempt, Outcome.DONE, claim_token=claim_token, started_at=started_at)
    batch = FinishBatch.of([done], node_id, now, NO_SEALING)  # done: no error to seal
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
        cur.execute(Q["set_search_path"], {"search_path": own_path(schema)})
        yield cur
        cur.execute(Q["set_search_path"], {"search_path": saved})  # (a failed one rolls back)
