"""Materialising a backlog on SQLite: the WAL checkpoint cadence (SQLite only).

While the materialiser's batches come back full, each commit lets the WAL grow (a page several
batches change is checkpointed once); the batch that ends the backlog puts SQLite's usual
cadence back.
"""

from __future__ import annotations

import sqlite3
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

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
    await app.schedules.add_many(
        [ScheduleRequest(name=f"user-{n}", type="t", cron=f"{n % 60} 9 * * *") for n in range(25)]
    )
    clock.advance(timedelta(days=1))
    worker = app.schedules.materializer(check_tzdata=False, batch_size=10, lookahead=timedelta(0))
    now = clock.now()

    def plan(due: list[DueSchedule], states: dict[int, OccurrenceState]) -> list[ScheduleAdvance]:
        return worker.plan(due, now, states)

    assert await cadence(store) == 1000
    full = await store.schedules.materialize("ns", now, 10, plan, now)  # type: ignore[arg-type]
    assert full.due == 10
    assert await cadence(store) == 40000
    assert await worker.tick(now) == 15  # the rest: full batches, then a short one
    assert await cadence(store) == 1000


@pytest.mark.parametrize("backend", ["sqlite"])  # one writer serves every tenant
async def test_occurrences_are_found_before_the_writer_is_taken(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding a rule's next occurrence may take tens of milliseconds (within its budget): on
    SQLite's one writer thread that would hold every tenant's writes and reads meanwhile."""
    import duetime.services.schedule_plans as materializing

    threads: list[str] = []
    expand = materializing.next_after

    def next_after(*args: Any, **options: Any) -> datetime | None:
        threads.append(threading.current_thread().name)
        return expand(*args, **options)

    monkeypatch.setattr(materializing, "next_after", next_after)
    clock = FrozenClock(START)
    app = AsyncApp(store.url, "ns", clock=clock, store=store)
    await app.schedules.add_many(
        [ScheduleRequest(name=f"user-{n}", type="t", cron="* * * * *") for n in range(5)]
    )
    clock.advance(timedelta(minutes=1))  # due, not late: planning asks for the next ones
    worker = app.schedules.materializer(check_tzdata=False)
    assert await worker.tick(clock.now()) == 5
    assert threads  # the next occurrences were found...
    writer = [name for name in threads if name.startswith("duetime-sqlite_")]
    assert writer == []  # ...and none of them on the writer's thread
