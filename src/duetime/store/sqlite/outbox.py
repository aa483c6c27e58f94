"""The outbox on SQLite: timers written through the caller's own ``sqlite3`` connection.

The caller's connection must be open on the store's own file (``PRAGMA database_list`` says
which); duetime writes there inside the caller's transaction, in a savepoint, with the same
functions the store writes with (:mod:`.writes`). The caller's transaction mode is respected:
a connection in Python's default mode whose transaction has not begun yet begins it as Python
itself would before a write (``BEGIN`` with its ``isolation_level``); one in autocommit mode
with no transaction open is refused, as a write there would commit on its own at once.

Workers must hear of the timers once the caller commits, which duetime does not see. SQLite
shows it all the same: from duetime's write until its commit or rollback, the caller's
transaction holds the file's write lock. :class:`CommitWatch` waits for that lock on a
connection of its own, lets it go at once and sends the earliest timer written to every
process's wake-up socket on the file (this one's too), even if the app has been closed since.
After a rollback the hint finds nothing; a hint costs a re-read, never a timer. A process that
exits right after committing may not live to send it: workers then find the timer at their
safety re-check.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from duetime.errors import InvalidInput
from duetime.model import NewTimer, OnConflict, PutResult, Timer
from duetime.store.sqlite.database import SqliteDatabase, begin_immediate, in_savepoint
from duetime.store.sqlite.wakeup import Broadcaster
from duetime.store.sqlite.writes import earliest_written, timer_rows, transition, write_timers

log = logging.getLogger(__name__)

WATCH_PATIENCE_MS = 10 * 60 * 1000
"""How long the watch waits for a caller's transaction to end before it announces anyway (the
workers' safety re-check finds a commit later than that)."""
WATCH_MOST_PAUSE = 0.02
"""The longest pause between two tries for the lock: a commit is heard within about this."""


class SqliteOutbox:
    """The :class:`~duetime.store.parts.OutboxStore` of a SQLite file."""

    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db
        self._watch = CommitWatch(db.path)

    async def put_timers_in(
        self,
        connection: object,
        timers: Iterable[NewTimer],
        on_conflict: OnConflict,
        now: datetime,
    ) -> list[PutResult]:
        """Store timers inside the caller's open transaction: they exist only if it commits."""
        conn = self._joinable(connection)
        timers = list(timers)
        rows = timer_rows(timers, now, self._db.sealing)
        with _writable():
            results = in_savepoint(
                conn, lambda c: write_timers(c, timers, rows, on_conflict, self._db.sealing)
            )
        earliest = earliest_written(results)
        if earliest is not None:
            self._watch.announce_after(earliest)
        return results

    async def cancel_in(self, connection: object, namespace: str, key: str, now: datetime) -> Timer:
        """Cancel a timer inside the caller's open transaction: undone if it rolls back."""
        conn = self._joinable(connection)
        with _writable():
            return in_savepoint(
                conn, lambda c: transition(c, "cancel", namespace, key, now, self._db.sealing)
            )

    def _joinable(self, connection: object) -> sqlite3.Connection:
        """The caller's connection, checked: on this file, with a transaction to join."""
        if not isinstance(connection, sqlite3.Connection):
            raise InvalidInput(
                "transaction",
                "this app's database is SQLite: pass a sqlite3.Connection open on its file "
                f"({self._db.path}), not {type(connection).__name__}",
            )
        try:
            cursor = connection.cursor()
        except sqlite3.ProgrammingError as exc:  # closed, or made in another thread
            raise InvalidInput(
                "transaction", f"the connection cannot be used here: {exc}"
            ) from None
        cursor.row_factory = None
        files = {name: file for _, name, file, *_ in cursor.execute("PRAGMA database_list")}
        main = files.get("main") or ""
        if not main:
            raise InvalidInput(
                "transaction",
                "the connection is to an in-memory or temporary database: open it on this app's "
                f"file ({self._db.path})",
            )
        if not _same_file(main, self._db.path):
            raise InvalidInput(
                "transaction",
                f"the connection is to {main}, not to this app's database file ({self._db.path})",
            )
        if cursor.execute("PRAGMA query_only").fetchone() != (0,):
            raise InvalidInput("transaction", READ_ONLY)
        _begin(connection)
        return connection


READ_ONLY = (
    "the connection is read-only (opened with mode=ro, PRAGMA query_only, or a file it may not "
    "write): pass one that may write"
)


@contextmanager
def _writable() -> Iterator[None]:
    """A write the caller's connection refuses as read-only (opened ``mode=ro``, or on a
    file it may not write) is refused naming ``transaction``; the savepoint has undone it."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        if exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_READONLY:
            raise InvalidInput("transaction", READ_ONLY) from exc
        raise


def _same_file(file: str, path: os.PathLike[str]) -> bool:
    try:
        return os.path.samefile(file, path)
    except OSError:
        return False


def _begin(conn: sqlite3.Connection) -> None:
    """Make sure a transaction is open on ``conn``, as the caller's own write would."""
    if conn.in_transaction:
        return
    autocommit = getattr(conn, "autocommit", None)  # Python 3.12+: True, False or legacy (-1)
    if autocommit is True or (autocommit in (None, -1) and conn.isolation_level is None):
        raise InvalidInput(
            "transaction",
            "the connection is in autocommit mode with no transaction open: BEGIN one first, "
            "so the timers commit or roll back with your work",
        )
    # Python's default mode: the transaction it would begin before a write, begun here.
    level = conn.isolation_level or ""
    conn.execute(f"BEGIN {level}")  # one of DEFERRED, IMMEDIATE, EXCLUSIVE (sqlite3 checks)


class CommitWatch:
    """Announces timers written in callers' transactions once those have ended (see the module).

    One thread at a time, with a connection of its own, started when there is something to
    watch and gone when there is not; every timer written before it takes the lock is covered
    by that one wait (their transactions all held the lock, so all have ended).
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._pending: list[datetime] = []
        self._running = False

    def announce_after(self, earliest: datetime) -> None:
        with self._lock:
            self._pending.append(earliest)
            if self._running:
                return
            self._running = True
        threading.Thread(target=self._run, name="duetime-sqlite-outbox", daemon=True).start()

    def _run(self) -> None:
        conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        sender = Broadcaster(self._path)
        try:
            conn.execute(f"PRAGMA busy_timeout = {WATCH_PATIENCE_MS}")
            while True:
                with self._lock:
                    pending, self._pending = self._pending, []
                    if not pending:
                        self._running = False
                        return
                self._wait_for_lock(conn)
                sender.send(min(pending))
        except BaseException:
            with self._lock:
                self._running = False
            raise
        finally:
            sender.close()
            conn.close()

    @staticmethod
    def _wait_for_lock(conn: sqlite3.Connection) -> None:
        try:
            begin_immediate(conn, most_pause=WATCH_MOST_PAUSE)
        except sqlite3.OperationalError as exc:  # still held after the patience: announce anyway
            log.warning("a transaction holding timers is still open: %s", exc)
            return
        conn.execute("ROLLBACK")
