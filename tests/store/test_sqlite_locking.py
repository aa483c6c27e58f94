"""Waiting for another process's write lock: SQLite only.

The store polls ``BEGIN IMMEDIATE`` in short steps instead of SQLite's escalating busy handler,
still bounded by the busy timeout. Another connection stands in for the other process.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import pytest
from storekit import NOW, new_timer

from duetime.store.sqlite.database import enter_wal
from duetime.store.sqlite.store import SqliteStore


def hold_write_lock(path: Path) -> sqlite3.Connection:
    """Another connection (as another process would) holding the file's write lock."""
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    return other


def test_a_write_waits_for_the_other_writer_then_commits(tmp_path: Path) -> None:
    path = tmp_path / "locked.db"

    async def scenario() -> list[str]:
        store = SqliteStore(f"sqlite:///{path}", busy_timeout=30.0)
        await store.open()
        try:
            other = hold_write_lock(path)
            release = threading.Timer(0.2, other.rollback)
            release.start()
            try:
                results = await store.put_timers([new_timer("a")], "error", NOW)
            finally:
                release.join()
                other.close()
            # the connection's busy timeout is back to what it was configured to be
            timeout = await store._db.read(
                lambda conn: conn.execute("PRAGMA busy_timeout").fetchone()[0]
            )
            assert timeout == 30_000
            return [r.timer.key for r in results]
        finally:
            await store.close()

    assert asyncio.run(scenario()) == ["a"]


def test_a_writer_that_never_lets_go_fails_after_the_busy_timeout(tmp_path: Path) -> None:
    path = tmp_path / "stuck.db"

    async def scenario() -> None:
        store = SqliteStore(f"sqlite:///{path}", busy_timeout=0.3)
        await store.open()
        try:
            other = hold_write_lock(path)
            try:
                with pytest.raises(sqlite3.OperationalError, match="locked"):
                    await store.put_timers([new_timer("a")], "error", NOW)
            finally:
                other.rollback()
                other.close()
            # nothing was left half-open: the next write goes through
            (result,) = await store.put_timers([new_timer("b")], "error", NOW)
            assert result.timer.key == "b"
            assert await store.get_timer("ns", "a") is None
        finally:
            await store.close()

    asyncio.run(scenario())


class SwitchingRace:
    """A connection whose switch to WAL meets another process doing the same ``busy`` times
    (SQLite fails one of two such switches at once, without its busy handler)."""

    def __init__(self, busy: int, code: int = sqlite3.SQLITE_BUSY) -> None:
        self.busy, self.code, self.tries = busy, code, 0

    def execute(self, sql: str) -> sqlite3.Cursor:
        assert sql == "PRAGMA journal_mode = WAL"
        self.tries += 1
        if self.tries <= self.busy:
            error = sqlite3.OperationalError("database is locked")
            error.sqlite_errorcode = self.code
            raise error
        return sqlite3.connect(":memory:").execute("SELECT 'wal'")


def test_switching_a_new_file_to_wal_is_tried_again_while_another_process_does() -> None:
    race = SwitchingRace(busy=3)
    assert enter_wal(race, patience=5.0) == "wal"  # type: ignore[arg-type]
    assert race.tries == 4


@pytest.mark.parametrize(
    ("race", "patience"),
    [(SwitchingRace(busy=1, code=sqlite3.SQLITE_IOERR), 5.0), (SwitchingRace(busy=10**6), 0.05)],
)
def test_other_errors_and_a_spent_patience_are_raised(race: SwitchingRace, patience: float) -> None:
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        enter_wal(race, patience)  # type: ignore[arg-type]
