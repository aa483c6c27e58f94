"""One SQLite file in WAL mode: the connection thread, group commit, and the wake-ups writes send.

Every call runs on one private thread that owns the connection, in the order the calls were
made, so the asyncio loop never blocks on disk and a transaction is never interleaved with
another call from this process. Writes that queue up while the thread is busy are committed
together (group commit: one fsync for, say, a worker's batch of outcomes and its next claim),
each in its own savepoint, and each caller hears back only after that durable commit. Other
processes coordinate through SQLite's own locking (``BEGIN IMMEDIATE``, polled in short steps
within a busy timeout), and learn about new timers through :mod:`duetime.store.sqlite.wakeup`.

A read made for a REST request runs under its :class:`~duetime.support.budgets.Budget`, on one of
:data:`READERS` read-only connections of its own (WAL lets them read beside the writer), so
a tenant's listings never hold up anyone's writes: one that has not reached a reader within
``connection_wait`` is dropped from the queue, and one whose statements run past
``statement_timeout`` is interrupted; either is :class:`StoreBusy`, a quick 503.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from duetime.errors import StoreBusy, StoreUnavailable
from duetime.store.codec import from_micros
from duetime.store.listeners import Listeners
from duetime.store.sqlite.wakeup import WakeupChannel
from duetime.support import budgets
from duetime.support.budgets import Budget
from duetime.support.sealing import NO_SEALING, Sealing

R = TypeVar("R")
Op = Callable[[sqlite3.Connection], Any]
PROGRESS_STEPS = 10_000
"""Virtual machine steps between two looks at a request's deadline (a few milliseconds)."""
READERS = 2
"""Threads (each with a read-only connection) serving the reads of REST requests."""


def path_from_url(url: str) -> Path:
    """``sqlite:///relative.db`` / ``sqlite:////abs/path.db`` → a filesystem path."""
    if not url.startswith("sqlite:///"):
        raise ValueError(f"not a sqlite URL: {url!r}")
    rest = url[len("sqlite:///") :]
    if not rest or rest == ":memory:":
        raise ValueError("duetime needs a database file: in-memory SQLite is not durable")
    return Path(rest)


class SqliteDatabase:
    """The connection to one database file, used from its own thread (see the module)."""

    def __init__(self, path: Path, *, busy_timeout: float = 30.0) -> None:
        self.path = path
        self.listeners = Listeners()
        """This process's wake-up listeners: :meth:`announce` calls them."""
        self.sealing: Sealing = NO_SEALING
        """What this process seals, and the ring that opens what it reads."""
        self._busy_timeout_ms = int(busy_timeout * 1000)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="duetime-sqlite")
        self._conn: sqlite3.Connection | None = None
        self._wakeup: WakeupChannel | None = None
        self._lock = threading.Lock()
        self._writes: list[tuple[Op, Future[Any]]] = []
        self._drain_scheduled = False
        self._released: int | None = None  # a buffered occurrence released (its run_at, µs)
        self._readers = self._new_readers()
        self._reader_local = threading.local()
        self._reader_conns: list[sqlite3.Connection] = []

    @property
    def is_open(self) -> bool:
        return self._conn is not None

    async def open(self) -> None:
        """Connect (StoreUnavailable when the file cannot be opened in WAL mode)."""
        if self._conn is not None:
            return
        loop = asyncio.get_running_loop()
        try:
            self._conn = await loop.run_in_executor(self._executor, self._connect)
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"cannot open SQLite database {self.path}: {exc}") from exc

    async def listen(self) -> None:
        """Hear other processes' wake-ups (after migrating: the channel outlives no schema)."""
        self._wakeup = WakeupChannel(self.path, self.listeners)
        await self._wakeup.start()

    async def close(self) -> None:
        if self._wakeup is not None:
            await self._wakeup.stop()
            self._wakeup = None
        loop = asyncio.get_running_loop()
        # Whatever still runs on the threads now is a straggler (a cancelled request's read):
        # end its statement, so closing waits for no one.
        with self._lock:
            readers = list(self._reader_conns)
            self._reader_conns.clear()
        for reader in readers:
            reader.interrupt()
        await loop.run_in_executor(None, self._readers.shutdown, True)
        for reader in readers:
            reader.close()
        self._readers = self._new_readers()
        self._reader_local = threading.local()
        if self._conn is not None:
            conn = self._conn
            conn.interrupt()
            await loop.run_in_executor(self._executor, conn.close)
            self._conn = None
        self._executor.shutdown(wait=True)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="duetime-sqlite")

    @staticmethod
    def _new_readers() -> ThreadPoolExecutor:
        return ThreadPoolExecutor(max_workers=READERS, thread_name_prefix="duetime-sqlite-read")

    def announce(self, earliest: datetime | None) -> None:
        """Tell this process's listeners at once and every other process through the channel."""
        self.listeners(earliest)
        if self._wakeup is not None:
            self._wakeup.broadcast(earliest)

    async def read(self, fn: Callable[[sqlite3.Connection], R]) -> R:
        """Run ``fn`` on the connection thread, outside any write transaction of this process
        (within the request's budget, if it has one)."""
        budget = budgets.current()
        if budget is None:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._executor, self._call, fn)
        if self._conn is None:
            raise StoreUnavailable("the SQLite store is not open")
        try:
            queued = self._readers.submit(self._call_within, fn, budget)
        except RuntimeError:  # closing: the executor takes no more work
            raise StoreUnavailable("the SQLite store is closed") from None
        answer = asyncio.wrap_future(queued)
        done, _ = await asyncio.wait([answer], timeout=budget.connection_wait)
        if not done and queued.cancel():  # still queued: give up its place
            raise StoreBusy(
                "the database is busy with other requests: this one did not start within "
                f"connection_wait ({budget.connection_wait:g} s); try again shortly"
            )
        try:
            return await answer  # started: its statements end by the timeout
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_READONLY:
                raise
        # It writes after all (a namespace or a node registered on first use): the reader
        # refused its first write, so nothing was written; it runs where writes run.
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._call, fn)

    def _reader(self) -> sqlite3.Connection:
        """This reader thread's connection: read-only, opened on first use."""
        conn: sqlite3.Connection | None = getattr(self._reader_local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=30.0
            )
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
            conn.execute("PRAGMA cache_size = -65536")
            conn.execute("PRAGMA query_only = 1")
            self._reader_local.conn = conn
            with self._lock:
                self._reader_conns.append(conn)
        return conn

    def _call_within(self, fn: Callable[[sqlite3.Connection], R], budget: Budget) -> R:
        """``fn`` on a reader's connection, interrupted (StoreBusy) once its work has run
        ``statement_timeout``: its statements by SQLite, its loops over rows by
        :func:`~duetime.support.budgets.checked` (the reader is as busy in Python as in SQL)."""
        conn = self._reader()
        deadline = time.monotonic() + budget.statement_timeout
        conn.set_progress_handler(lambda: time.monotonic() > deadline, PROGRESS_STEPS)
        try:
            with budgets.within(budget), budgets.ending_at(deadline):  # on this thread too
                return fn(conn)
        except budgets.Overrun as exc:
            raise _overrun(budget) from exc
        except sqlite3.OperationalError as exc:
            if (
                time.monotonic() <= deadline
                or exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_READONLY
            ):
                raise
            raise _overrun(budget) from exc
        finally:
            conn.set_progress_handler(None, 0)
            _rollback(conn)  # a transaction ``fn`` began must not pin an old snapshot

    def _call(self, fn: Callable[[sqlite3.Connection], R]) -> R:
        if self._conn is None:
            raise StoreUnavailable("the SQLite store is not open")
        return fn(self._conn)

    async def write(self, fn: Callable[[sqlite3.Connection], R]) -> R:
        """Run ``fn`` in a write transaction, taken up front so it cannot deadlock.

        Writes queued while the connection is busy share one transaction — group commit: one
        fsync for all of them — each in its own savepoint, so one that raises is rolled back
        alone. Each caller still hears back only after the commit that made its write durable.
        A REST request's write still queued after its ``connection_wait`` (the thread busy, or
        another process holding the file's write lock) leaves the queue: StoreBusy.
        """
        future: Future[R] = Future()
        with self._lock:
            self._writes.append((fn, future))
            if not self._drain_scheduled:
                try:
                    self._executor.submit(self._drain_writes)
                except RuntimeError:  # closing: the executor takes no more work
                    self._writes.remove((fn, future))
                    raise StoreUnavailable("the SQLite store is closed") from None
                self._drain_scheduled = True
        budget = budgets.current()
        try:
            answer = asyncio.wrap_future(future)
            if budget is not None:
                done, _ = await asyncio.wait([answer], timeout=budget.connection_wait)
                if not done and future.cancel():  # not begun: the drain skips it
                    raise StoreBusy(
                        "the database is busy: this request's write did not start within "
                        f"connection_wait ({budget.connection_wait:g} s); try again shortly"
                    )
            return await answer
        finally:
            self._announce_released()

    def _on_released(self, run_at_us: int) -> None:
        """On the connection thread, inside a write: a buffered occurrence was released
        (``hear_releases`` in schedules.sql); announced once the write is done."""
        with self._lock:
            if self._released is None or run_at_us < self._released:
                self._released = run_at_us

    def _announce_released(self) -> None:
        if self._released is None:  # nearly always: no lock taken on the hot path
            return
        with self._lock:
            released, self._released = self._released, None
        if released is not None:
            self.announce(from_micros(released))

    def _drain_writes(self) -> None:
        """On the connection thread: commit every write queued so far, together."""
        with self._lock:
            queued, self._writes = self._writes, []
            self._drain_scheduled = False
        ops = [(fn, future) for fn, future in queued if future.set_running_or_notify_cancel()]
        while ops:
            ops = self._commit_group(ops)

    def _commit_group(self, ops: list[tuple[Op, Future[Any]]]) -> list[tuple[Op, Future[Any]]]:
        """Run ``ops`` in one transaction; return those to run again in a fresh one."""
        conn = self._conn
        if conn is None:
            for _, future in ops:
                future.set_exception(StoreUnavailable("the SQLite store is not open"))
            return []
        if len(ops) == 1:
            fn, future = ops[0]
            try:
                future.set_result(write_alone(conn, fn))
            except BaseException as exc:
                future.set_exception(exc)
            return []
        try:
            begin_immediate(conn)
        except BaseException as exc:
            for _, future in ops:
                future.set_exception(exc)
            return []
        done: list[tuple[Future[Any], Any]] = []
        for index, (fn, future) in enumerate(ops):
            try:
                conn.execute("SAVEPOINT duetime_write")
                result = fn(conn)
            except BaseException as exc:
                if undo_savepoint(conn):
                    future.set_exception(exc)
                    continue
                # SQLite gave up the whole transaction (e.g. disk full or I/O error): what
                # the others wrote is gone too; run them again on their own — all but those
                # that failed already (their callers have had their answer).
                future.set_exception(exc)
                return [op for op in ops[:index] if not op[1].done()] + ops[index + 1 :]
            conn.execute("RELEASE duetime_write")
            done.append((future, result))
        try:
            conn.execute("COMMIT")
        except BaseException as exc:
            _rollback(conn)
            for future, _ in done:
                future.set_exception(exc)
            return []
        for future, result in done:
            future.set_result(result)
        return []

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(
            self.path, isolation_level=None, check_same_thread=False, timeout=30.0
        )
        conn.row_factory = sqlite3.Row
        conn.create_function("duetime_released", 1, self._on_released)
        conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
        mode = enter_wal(conn, self._busy_timeout_ms / 1000)
        if str(mode).lower() != "wal":
            raise StoreUnavailable(f"could not put {self.path} in WAL mode (got {mode})")
        conn.execute("PRAGMA synchronous = FULL")
        # The hot table and its indexes should stay in memory: the default 2 MB page cache makes
        # every claim and finish of a large backlog re-read pages (a cap, not an allocation).
        conn.execute("PRAGMA cache_size = -65536")
        conn.execute("PRAGMA foreign_keys = ON")
        return conn


def write_alone(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], R]) -> R:
    """Run ``fn`` in a transaction of its own."""
    begin_immediate(conn)
    try:
        result = fn(conn)
        conn.execute("COMMIT")
    except BaseException:
        _rollback(conn)
        raise
    return result


_POLL_FIRST = 0.0001
_POLL_MAX = 0.002


def enter_wal(conn: sqlite3.Connection, patience: float) -> object:
    """``PRAGMA journal_mode = WAL``, tried again while another process holds the file.

    Two processes opening a brand-new file at once (a worker starting, a CLI command beside it)
    both switch it to WAL, which needs the exclusive lock; SQLite sees them wait for each other
    and fails one at once with "database is locked", without its busy handler. The switch is
    retried every few milliseconds for up to ``patience`` seconds. Returns the mode reached.
    """
    deadline = time.monotonic() + patience
    while True:
        try:
            return conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        except sqlite3.OperationalError as exc:
            busy = exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY
            if not busy or time.monotonic() >= deadline:
                raise
        time.sleep(0.005)


def begin_immediate(conn: sqlite3.Connection, most_pause: float = _POLL_MAX) -> None:
    """``BEGIN IMMEDIATE``, waiting for another process's write lock in short steps.

    SQLite's own busy handler sleeps 1, 2, 5, 10, … 100 ms between tries, so a writer that
    finds the lock taken for 3 ms waits 8, and two processes sharing a file (a producer and a
    worker) see 100-ms latency tails. Polling every 0.1 to 2 ms keeps the wait close to the
    holder's commit time (``most_pause`` at most between tries); the connection's busy timeout
    still bounds the whole wait.
    """
    patience_ms = int(conn.execute("PRAGMA busy_timeout").fetchone()[0])
    conn.execute("PRAGMA busy_timeout = 0")
    try:
        deadline = time.monotonic() + patience_ms / 1000
        pause = _POLL_FIRST
        while True:
            try:
                conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                busy = exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY
                if not busy or time.monotonic() >= deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, most_pause)
    finally:
        conn.execute(f"PRAGMA busy_timeout = {patience_ms}")


def in_savepoint(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], R]) -> R:
    """Run ``fn`` in a savepoint of the transaction open on ``conn``: if it raises, what it
    wrote is undone and the transaction carries on as it was."""
    conn.execute("SAVEPOINT duetime_write")
    try:
        result = fn(conn)
    except BaseException:
        undo_savepoint(conn)
        raise
    conn.execute("RELEASE duetime_write")
    return result


def undo_savepoint(conn: sqlite3.Connection) -> bool:
    """Roll back to the write's savepoint; False when the whole transaction is gone."""
    if not conn.in_transaction:
        return False
    try:
        conn.execute("ROLLBACK TO duetime_write")
        conn.execute("RELEASE duetime_write")
    except sqlite3.Error:
        _rollback(conn)
        return False
    return True


def _overrun(budget: Budget) -> StoreBusy:
    return StoreBusy(
        "the request's database work ran past statement_timeout "
        f"({budget.statement_timeout:g} s) and was ended; ask for less (a smaller page) "
        "or try again"
    )


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
