"""What the store says about the run's timers, read with SQL from its own tables.

SQLite keeps instants as integer microseconds; PostgreSQL as timestamptz, and keeps the first
attempt of a timer done at once on the timer row (``done_by``): its ``all_attempts`` view shows
every attempt as rows. Nothing is archived during a run (the workers set ``archive_after`` to a
day), so the hot tables hold everything.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bench.chaoslib.worker import NAMESPACE

PENDING = ("scheduled", "running", "retrying")

TIMERS_SQL = "SELECT key, status, attempts, due_at FROM timers WHERE namespace = ?"
ATTEMPTS_SQL = {
    "sqlite": """
        SELECT t.key, a.number, a.node_id, a.outcome, a.finished_at, a.claimed_at, a.started_at
        FROM attempts a JOIN timers t ON t.id = a.timer_id WHERE t.namespace = ?""",
    "postgres": """
        SELECT t.key, a.number, a.node_id, a.outcome, a.finished_at, a.claimed_at, a.started_at
        FROM all_attempts a JOIN timers t ON t.id = a.timer_id WHERE t.namespace = %s""",
}
UNFINISHED_SQL = (
    "SELECT count(*) FROM timers WHERE namespace = ? "
    "AND status IN ('scheduled', 'running', 'retrying')"
)
DONE_SQL = "SELECT count(*) FROM timers WHERE namespace = ? AND status = 'done'"


@dataclass(frozen=True, slots=True)
class TimerRow:
    key: str
    status: str
    attempts: int
    due_us: int


@dataclass(frozen=True, slots=True)
class AttemptRow:
    key: str
    number: int
    node: str
    outcome: str | None
    finished_us: int | None = None
    """When its outcome was recorded (the database's clock: the machine's, on this bench)."""
    claimed_us: int | None = None
    """When a claim took its row, as the store records it (None: not recorded)."""
    started_us: int | None = None
    """When its handler began, as its worker reported it (None: not known, e.g. lost)."""


def kind_of(url: str) -> str:
    return "sqlite" if url.startswith("sqlite:") else "postgres"


class StoreTables:
    """Read-only SQL on one store (its own connection, opened per call: the database may have
    just restarted)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.kind = kind_of(url)

    def _rows(self, sql: str) -> list[tuple[Any, ...]]:
        if self.kind == "sqlite":
            conn = sqlite3.connect(self.url.removeprefix("sqlite:///"), timeout=30)
            try:
                return conn.execute(sql, (NAMESPACE,)).fetchall()
            finally:
                conn.close()
        import psycopg

        from duetime.postgres import conninfo

        with psycopg.connect(conninfo(self.url), connect_timeout=5) as pg:
            return pg.execute(sql.replace("?", "%s"), (NAMESPACE,)).fetchall()

    def unfinished(self) -> int:
        return int(self._rows(UNFINISHED_SQL)[0][0])

    def done(self) -> int:
        return int(self._rows(DONE_SQL)[0][0])

    def timers(self) -> dict[str, TimerRow]:
        return {
            key: TimerRow(key, status, attempts, _us(due))
            for key, status, attempts, due in self._rows(TIMERS_SQL)
        }

    def attempts(self) -> list[AttemptRow]:
        return [
            AttemptRow(
                key, number, node, outcome, _maybe_us(at), _maybe_us(claimed), _maybe_us(began)
            )
            for key, number, node, outcome, at, claimed, began in self._rows(
                ATTEMPTS_SQL[self.kind]
            )
        ]


def _us(value: int | datetime) -> int:
    if isinstance(value, datetime):
        return int(value.timestamp()) * 1_000_000 + value.microsecond
    return int(value)


def _maybe_us(value: int | datetime | None) -> int | None:
    return None if value is None else _us(value)
