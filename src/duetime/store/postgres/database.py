"""The connection pool, with one rule for failures: callers see StoreUnavailable, never hangs.

Every store call borrows a pooled connection (autocommit; writes open an explicit transaction),
except the calls a worker's leases depend on, which have lanes of their own (:data:`LANES`).
When the server goes away, the failing call raises :class:`StoreUnavailable`, the broken
connection is dropped, and the idle ones are checked in the background, so the first call after
the server is back gets a fresh connection instead of a stale one. A server that refuses writes
(a primary demoted to a standby behind a name that moved) is unavailable too, and that
connection is closed: the next one goes where the URL leads now. A deadlock or serialization
failure (the server rolled the transaction back) is retried a few times before it is reported.

Work done for a REST request runs under its :class:`~duetime.support.budgets.Budget`: it waits at
most ``connection_wait`` for a connection and each statement runs at most ``statement_timeout``
(``SET LOCAL statement_timeout``, so the setting ends with the request's transaction and never
reaches a worker's use of the connection); either is :class:`StoreBusy`, a quick 503."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, NamedTuple, TypeVar

import psycopg
from psycopg import AsyncConnection, AsyncCursor
from psycopg.abc import Buffer
from psycopg.adapt import Loader
from psycopg.errors import (
    DeadlockDetected,
    IdleInTransactionSessionTimeout,
    QueryCanceled,
    ReadOnlySqlTransaction,
    TransactionRollback,
)
from psycopg.pq import TransactionStatus
from psycopg.rows import AsyncRowFactory, DictRow, dict_row
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from duetime.errors import CommitOutcomeUnknown, StoreBusy, StoreUnavailable
from duetime.store.postgres.settings import PostgresSettings
from duetime.store.queries import load_queries
from duetime.support import budgets
from duetime.support.budgets import Budget
from duetime.support.jsontext import load_json
from duetime.support.sealing import NO_SEALING, Sealing

log = logging.getLogger("duetime.store.postgres")

R = TypeVar("R")
Conn = AsyncConnection[DictRow]
Work = Callable[[Conn], Awaitable[R]]


class Statement(NamedTuple):
    """One statement of :meth:`Database.atomic`, and how its rows are made."""

    query: str
    params: Mapping[str, Any]
    rows: AsyncRowFactory[Any] = dict_row
    binary: bool = False
    """Rows in PostgreSQL's binary format: cheaper to decode (instants are integers, not text
    to parse)."""


ROLLBACK_RETRIES = 3
Q = load_queries("duetime.store.postgres", "session.sql")
_OPEN = (TransactionStatus.INTRANS, TransactionStatus.INERROR)
"""A transaction left open (or failed) on a connection: a pipelined write that did not end it
rolls it back before the connection goes back to the pool."""

Lane = Literal["heartbeat", "claims"]
LANES: dict[Lane, int] = {"heartbeat": 1, "claims": 2}
"""Connections kept apart from the pool, each lane opened on first use (a process that never
heartbeats or claims never connects them), for the calls a worker's leases depend on.

Taken from the pool, they would queue behind every call waiting there — a hundred
transactional handlers sharing a few connections, each holding one for its handler's whole
transaction. A heartbeat waiting there lets the leases of the rows waiting their turn run
out while their worker lives (rescued, recorded lost, run again); a claim waiting there has
spent its lease before its rows are known to be held, so no heartbeat renews them in time.
``claims``: as many as a worker pipelines (its producer's ``CLAIMS_IN_FLIGHT``)."""


class JsonbBinaryLoader(Loader):
    """Binary jsonb → Python: a version byte (1), then the same JSON text."""

    format = psycopg.pq.Format.BINARY

    def load(self, data: Buffer) -> Any:
        return load_json(str(memoryview(data)[1:], "utf-8"))


class JsonbLoader(Loader):
    """jsonb text → Python, as psycopg's own loader but cheaper (:func:`load_json`): every
    claimed timer's payload passes through here."""

    def load(self, data: Buffer) -> Any:
        return load_json(str(data, "utf-8"))


async def configure(conn: Conn) -> None:
    """Set up a new pooled connection."""
    conn.adapters.register_loader("jsonb", JsonbLoader)
    conn.adapters.register_loader("jsonb", JsonbBinaryLoader)


class Database:
    """A psycopg pool on one schema; :meth:`read` and :meth:`write` run work on a connection."""

    def __init__(self, settings: PostgresSettings) -> None:
        self.settings = settings
        self.sealing: Sealing = NO_SEALING
        """What this process seals, and the ring that opens what it reads."""
        self._pool: AsyncConnectionPool[Conn] | None = None
        self._lanes: dict[Lane, AsyncConnectionPool[Conn]] = {}  # see LANES: opened on use
        self._lane_opening = asyncio.Lock()
        self._checking: asyncio.Task[None] | None = None
        self._after_commit: dict[int, list[Statement]] = {}  # by id() of a connection in write()

    @property
    def is_open(self) -> bool:
        return self._pool is not None

    async def open(self) -> None:
        """Create the pool and wait for its first connection (StoreUnavailable if none comes)."""
        if self._pool is not None:
            return
        pool = self._new_pool(self.settings.pool_min, self.settings.pool_max, "")
        try:
            await pool.open(wait=self.settings.pool_min > 0, timeout=self.settings.pool_timeout)
        except psycopg.Error as exc:
            await pool.close()
            raise StoreUnavailable(f"cannot connect to PostgreSQL: {exc}") from exc
        self._pool = pool

    def _new_pool(self, min_size: int, max_size: int, suffix: str) -> AsyncConnectionPool[Conn]:
        return AsyncConnectionPool(
            self.settings.conninfo,
            connection_class=AsyncConnection[DictRow],
            kwargs={"autocommit": True, "row_factory": dict_row},
            min_size=min_size,
            max_size=max_size,
            timeout=self.settings.pool_timeout,
            # Give up a reconnection burst quickly: the next caller starts a new one, so a
            # server that comes back is used at once rather than after a long backoff.
            reconnect_timeout=self.settings.pool_timeout,
            name=f"duetime-{self.settings.schema}{suffix}",
            configure=configure,
            open=False,
        )

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        lanes, self._lanes = self._lanes, {}
        if self._checking is not None:
            self._checking.cancel()
            self._checking = None
        for lane in lanes.values():
            await lane.close()
        if pool is not None:
            await pool.close()

    async def read(self, work: Work[R], *, lane: Lane | None = None) -> R:
        """Run ``work`` on a connection in autocommit mode (each statement on its own);
        ``lane``: on that lane's connections, not the pool's (see :data:`LANES`)."""
        pool = None if lane is None else await self._lane(lane)
        return await self._run(work, transaction=False, pool=pool)

    async def write(self, work: Work[R], *, lane: Lane | None = None) -> R:
        """Run ``work`` in one transaction: all of it commits, or none of it.

        Statements ``work`` hands to :meth:`after_commit` run once it has committed.
        ``lane``: on that lane's connections, not the pool's (see :data:`LANES`).
        """
        pool = None if lane is None else await self._lane(lane)
        return await self._run(work, transaction=True, pool=pool)

    async def pipelined_write(self, work: Work[R], *, lane: Lane | None = None) -> R:
        """Run ``work`` in one transaction, as :meth:`write`, in pipeline mode: BEGIN goes out
        with its first statements and COMMIT with its last, so a transaction of a few
        dependent steps costs a round trip a step, not two more for BEGIN and COMMIT. ``work``
        runs in the pipeline: a statement waits for nothing until a result is fetched (which
        sends what is queued) or the pipeline synced. No :meth:`after_commit`.
        """
        commit = _Commit()
        budget = budgets.current()

        async def run(conn: Conn) -> R:
            try:
                async with conn.pipeline():
                    await conn.execute(Q["begin"])
                    if budget is not None:
                        await _limit_statements(conn, budget)
                    result = await work(conn)
                    await conn.execute(Q["commit"])
                    commit.sent = True  # leaving the block syncs: a loss leaves it unknown
            except BaseException:
                if not conn.closed and conn.info.transaction_status in _OPEN:
                    with contextlib.suppress(psycopg.Error):
                        await conn.execute(Q["rollback"])
                raise
            commit.sent = False
            return result

        pool = None if lane is None else await self._lane(lane)
        return await self._run(run, transaction=False, pool=pool, commit=commit, limits_itself=True)

    async def _lane(self, name: Lane) -> AsyncConnectionPool[Conn]:
        if self._pool is None:
            raise StoreUnavailable("the PostgreSQL store is not open")
        async with self._lane_opening:
            lane = self._lanes.get(name)
            if lane is None:
                lane = self._new_pool(0, LANES[name], f"-{name}")
                await lane.open(wait=False)
                self._lanes[name] = lane
        return lane

    def after_commit(self, conn: Conn, statement: Statement) -> bool:
        """Send ``statement`` on ``conn`` after the :meth:`write` transaction it is in commits
        (dropped if it rolls back); False when ``conn`` is in no such transaction — a caller's
        own, say — and the caller should run it there itself.

        For ``NOTIFY``: PostgreSQL serialises the commits of transactions that notify (a global
        lock is held from the notify queue's update to the end of the commit, WAL flush
        included), so concurrent writers that notify inside their transactions wait for each
        other's fsyncs. A notify in a transaction of its own that does not wait for its flush
        (``notify_after_commit`` in session.sql) holds that lock for microseconds. It is best
        effort: a hint lost between the commit and the notify costs latency, never work
        (workers re-check on their own).
        """
        pending = self._after_commit.get(id(conn))
        if pending is None:
            return False
        pending.append(statement)
        return True

    async def atomic(
        self,
        statements: Sequence[Statement],
        after: Sequence[Statement] = (),
        *,
        lane: Lane | None = None,
    ) -> list[list[Any]]:
        """Run ``statements`` as one transaction in one round trip; their rows, in order.
        ``after`` runs once that transaction has committed (as :meth:`after_commit`);
        ``lane``: on that lane's connections, not the pool's (see :data:`LANES`).

        They go out in a pipeline with a single sync and no BEGIN: the server runs everything
        up to the sync as one implicit transaction and commits it there, or rolls all of it back
        at the first error. A claim or a finish thus costs one round trip, not four (BEGIN,
        the statements, COMMIT); ``SET LOCAL`` settings last until that commit, as in a block.
        A request's statement timeout is the first statement of that transaction, not a
        transaction block around it (BEGIN, the setting, COMMIT: three more round trips).
        """

        async def work(conn: Conn) -> list[list[Any]]:
            cursors: list[AsyncCursor[Any]] = []
            async with conn.pipeline() as pipeline:
                if budget is not None:
                    await _limit_statements(conn, budget)
                for query, params, rows, binary in statements:
                    cursor = conn.cursor(row_factory=rows, binary=binary)
                    await cursor.execute(query, params)
                    cursors.append(cursor)
                commit.sent = True  # the sync commits: from here, a loss leaves it unknown
                await pipeline.sync()
                results = [await c.fetchall() if c.description else [] for c in cursors]
            commit.sent = False  # committed: what comes after cannot undo it
            await _send_after_commit(conn, after, budget)
            return results

        commit = _Commit()
        budget = budgets.current()
        pool = None if lane is None else await self._lane(lane)
        return await self._run(
            work, transaction=False, pool=pool, commit=commit, limits_itself=True
        )

    async def send(self, statement: Statement) -> None:
        """Run one statement in autocommit mode, like :meth:`read`, in one round trip: a
        request's statement timeout goes with it, as :meth:`atomic` sends it."""
        budget = budgets.current()

        async def work(conn: Conn) -> None:
            await _pipelined(conn, [statement], budget)

        await self._run(work, transaction=False, limits_itself=True)

    async def _run(
        self,
        work: Work[R],
        *,
        transaction: bool,
        pool: AsyncConnectionPool[Conn] | None = None,
        commit: _Commit | None = None,
        limits_itself: bool = False,
    ) -> R:
        """``limits_itself``: ``work`` (autocommit) sends the budget's statement timeout itself,
        in the implicit transaction of its statements."""
        pool = pool or self._pool
        if pool is None:
            raise StoreUnavailable("the PostgreSQL store is not open")
        commit = commit or _Commit()
        budget = budgets.current()
        wait = None if budget is None else budget.connection_wait
        attempt = 0
        while True:
            attempt += 1
            commit.sent = False
            try:
                async with pool.connection(timeout=wait) as conn:
                    try:
                        return await self._work(
                            conn, work, transaction, commit, None if limits_itself else budget
                        )
                    except ReadOnlySqlTransaction:
                        await conn.close()  # the server was demoted: the pool drops it
                        raise
            except (TransactionRollback, DeadlockDetected) as exc:  # psycopg: not a subclass
                if attempt >= ROLLBACK_RETRIES:
                    raise StoreUnavailable(
                        f"PostgreSQL rolled the transaction back: {exc}"
                    ) from exc
                log.info("retrying a transaction PostgreSQL rolled back: %s", exc)
                await asyncio.sleep(0.01 * attempt)
            except PoolTimeout as exc:
                if budget is None:
                    raise StoreUnavailable(f"PostgreSQL is unavailable: {exc}") from exc
                raise StoreBusy(
                    "every database connection is busy: none came free within "
                    f"connection_wait ({budget.connection_wait:g} s); try again shortly"
                ) from exc
            except QueryCanceled as exc:
                if budget is None:
                    raise StoreUnavailable(f"PostgreSQL canceled a statement: {exc}") from exc
                raise StoreBusy(
                    "the request's database work ran past statement_timeout "
                    f"({budget.statement_timeout:g} s) and was ended; ask for less (a smaller "
                    "page) or try again"
                ) from exc
            except (
                psycopg.OperationalError,
                psycopg.InterfaceError,
                IdleInTransactionSessionTimeout,  # the server closed the session
                ReadOnlySqlTransaction,  # a standby now: the primary is elsewhere
            ) as exc:
                self._check_idle_connections(pool)
                if commit.sent and not isinstance(exc, ReadOnlySqlTransaction):
                    raise CommitOutcomeUnknown(exc) from exc
                raise StoreUnavailable(f"PostgreSQL is unavailable: {exc}") from exc

    async def _work(
        self,
        conn: Conn,
        work: Work[R],
        transaction: bool,
        commit: _Commit,
        budget: Budget | None,
    ) -> R:
        if not transaction:
            if budget is None:
                return await work(conn)
            async with conn.transaction():  # the timeout lasts as long as it
                await _limit_statements(conn, budget)
                result = await work(conn)
                commit.sent = True  # leaving the block sends COMMIT
            commit.sent = False
            return result
        pending: list[Statement] = []
        self._after_commit[id(conn)] = pending
        try:
            async with conn.transaction():
                if budget is not None:
                    await _limit_statements(conn, budget)
                result = await work(conn)
                commit.sent = True  # leaving the block sends COMMIT
            commit.sent = False
        finally:
            del self._after_commit[id(conn)]
        await _send_after_commit(conn, pending)
        return result

    def _check_idle_connections(self, pool: AsyncConnectionPool[Conn]) -> None:
        """After a connection failed, weed out the idle ones that died with it (in background)."""
        if self._checking is not None and not self._checking.done():
            return
        self._checking = asyncio.get_running_loop().create_task(self._check(pool))

    @staticmethod
    async def _check(pool: AsyncConnectionPool[Conn]) -> None:
        try:
            await pool.check()
        except Exception as exc:  # the pool is closing, or the server is still away
            log.debug("checking pooled connections failed: %s", exc)


class _Commit:
    """Whether a write's commit has been sent and not yet answered: a connection lost then
    leaves its outcome unknown (:class:`CommitOutcomeUnknown`), where a loss before it means
    nothing was written."""

    __slots__ = ("sent",)

    def __init__(self) -> None:
        self.sent = False


async def _limit_statements(conn: Conn, budget: Budget) -> None:
    """End any statement of this transaction that runs past the budget's timeout."""
    timeout_ms = max(1, round(budget.statement_timeout * 1000))
    await conn.execute(Q["limit_statements"], {"timeout": f"{timeout_ms}ms"})


async def _pipelined(conn: Conn, statements: Sequence[Statement], budget: Budget | None) -> None:
    """``statements`` as one implicit transaction in one round trip, the budget's statement
    timeout first (it ends with that transaction)."""
    async with conn.pipeline() as pipeline:
        if budget is not None:
            await _limit_statements(conn, budget)
        for query, params, *_ in statements:
            await conn.execute(query, params)
        await pipeline.sync()


async def _send_after_commit(
    conn: Conn, statements: Sequence[Statement], budget: Budget | None = None
) -> None:
    """Best effort: the transaction before them has committed, so a failure here must not
    turn the caller's answer into an error (see :meth:`Database.after_commit`). Under a
    ``budget`` they go in one round trip with its statement timeout."""
    if budget is not None and statements:
        try:
            await _pipelined(conn, statements, budget)
        except Exception as exc:  # whatever it is: the commit before it stands
            log.warning("a statement after a commit failed (%s); the commit stands", exc)
        return
    for query, params, *_ in statements:
        try:
            await conn.execute(query, params)
        except Exception as exc:
            log.warning("a statement after a commit failed (%s); the commit stands", exc)
            return
