"""Materialising a backlog on SQLite: the WAL checkpoint cadence (SQLite only).

While the materialiser's batches come back full, each commit lets the WAL grow (a page several
batches change is checkpointed once); the batch that ends the backlog puts SQLite's usual
cadence back.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta

import pytest

from duetime import AsyncApp, FrozenClock
from duetime.model.schedules import DueSchedule, OccurrenceState, ScheduleAdvance
from duetime.schedules import ScheduleRequest
from duetime.store import Store
from duetime.store.sqlite.store import SqliteStore

START = datetime(2025, 6, 10, tzinfo=UTC)


async def cadence(store: SqliteStore) -> int:
    def read(conn: sqlite3.Connection) -> int:
        return int(conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0])

    return await store._db.read(read)


@pytest.mark.parametrize("backend", ["sqlite"])  # SQLite's WAL checkpoints
async def test_a_backlog_checkpoints_every_few_batches_then_as_usual(store: Store) -> None:
    assert isinstance(store, SqliteStore)
    clock = FrozenClock(START)
    app = AsyncApp(store.url, "ns", clock=clock, store=store)
    await app.add_schedules(
        [ScheduleRequest(name=f"user-{n}", type="t", cron=f"{n % 60} 9 * * *") for n in range(25)]
    )
    clock.advance(timedelta(days=1))
    worker = app.materializer(check_tzdata=False, batch_size=10, lookahead=timedelta(0))
    now = clock.now()

    def plan(due: list[DueSchedule], states: dict[int, OccurrenceState]) -> list[ScheduleAdvance]:
        return worker.plan(due, now, states)

    assert await cadence(store) == 1000
    full = await store.schedules.materialize("ns", now, 10, plan, now)  # type: ignore[arg-type]
    assert full.due == 10
    assert await cadence(store) == 40000
    assert await worker.tick(now) == 15  # the rest: full batches, then a short one
    assert await cadence(store) == 1000
