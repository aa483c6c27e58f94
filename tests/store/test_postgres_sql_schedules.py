"""Managing schedules from SQL (migration 0030): add_schedule, pause_schedule, resume_schedule
and remove_schedule store a request in the caller's transaction; a worker applies it with the
Python API's own checks and records the outcome, failed ones with their reason."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
from storekit import NOW, PG_URL

from duetime import AsyncApp, FrozenClock
from duetime.app.sql_schedules import ScheduleChanges
from duetime.errors import NotFound


def _sql(schema: str, query: str, *params: Any, commit: bool = True) -> tuple[Any, ...]:
    with psycopg.connect(PG_URL, options=f"-c search_path={schema}") as conn:
        row = conn.execute(query, params).fetchone()
        if commit:
            conn.commit()
        else:
            conn.rollback()
    assert row is not None
    return tuple(row)


async def _apply(app: AsyncApp) -> None:
    """One round of the worker's service that applies schedule changes made from SQL."""
    (changes,) = [s for s in app.worker().services if isinstance(s, ScheduleChanges)]
    await changes.once()


async def test_a_schedule_added_from_sql_is_applied_by_the_worker(
    pg_url: str, pg_schema: str
) -> None:
    app = AsyncApp(pg_url, "ns", clock=FrozenClock(NOW))
    await app.open()
    try:
        _sql(
            pg_schema,
            "SELECT * FROM add_schedule('ns', 'gone', 'report', cron => '0 9 * * *')",
            commit=False,
        )
        request_id, name, status = _sql(
            pg_schema,
            "SELECT * FROM add_schedule('ns', 'daily', 'report', '{\"k\": 1}',"
            " cron => '0 9 * * MON-FRI', timezone => 'Europe/Paris', max_attempts => 5)",
        )
        assert (name, status) == ("daily", "pending")
        assert _sql(pg_schema, "SELECT status FROM schedule_request('ns', %s)", request_id) == (
            "pending",
        )
        (monthly,) = _sql(
            pg_schema,
            "SELECT request_id FROM add_schedule('ns', 'monthly', 'pay',"
            " rrule => 'FREQ=MONTHLY;BYDAY=MO;BYSETPOS=1', dtstart => '2025-03-03 09:00')",
        )
        (bad,) = _sql(
            pg_schema,
            "SELECT request_id FROM add_schedule('ns', 'bad', 'report', cron => '61 * * * *')",
        )
        await _apply(app)

        assert _sql(
            pg_schema, "SELECT status, outcome FROM schedule_request('ns', %s)", request_id
        )[:2] == ("applied", "created")
        daily = await app.schedules.get("daily")
        assert (daily.cron, daily.timezone, daily.payload, daily.max_attempts) == (
            "0 9 * * MON-FRI",
            "Europe/Paris",
            {"k": 1},
            5,
        )
        assert daily.next_at is not None
        assert (await app.schedules.get("monthly")).calendar is not None
        assert _sql(pg_schema, "SELECT status FROM schedule_request('ns', %s)", monthly) == (
            "applied",
        )
        status, outcome, _ = _sql(pg_schema, "SELECT * FROM schedule_request('ns', %s)", bad)
        assert status == "failed"
        assert outcome.startswith("cron: ")
        with pytest.raises(NotFound):
            await app.schedules.get("bad")
        with pytest.raises(NotFound):
            await app.schedules.get("gone")  # rolled back: never requested

        for call, active in (("pause_schedule", False), ("resume_schedule", True)):
            _sql(pg_schema, f"SELECT * FROM {call}('ns', 'daily')")
            await _apply(app)
            assert (await app.schedules.get("daily")).active is active
        (removed,) = _sql(pg_schema, "SELECT request_id FROM remove_schedule('ns', 'daily')")
        (missing,) = _sql(pg_schema, "SELECT request_id FROM pause_schedule('ns', 'nope')")
        await _apply(app)
        with pytest.raises(NotFound):
            await app.schedules.get("daily")
        assert _sql(pg_schema, "SELECT status FROM schedule_request('ns', %s)", removed) == (
            "applied",
        )
        assert _sql(pg_schema, "SELECT status FROM schedule_request('ns', %s)", missing) == (
            "failed",
        )
    finally:
        await app.close()


BAD_CALLS = [
    ("add_schedule('nope', 'n', 't', cron => '* * * * *')", "namespace", "22023"),
    ("add_schedule('ns', '', 't', cron => '* * * * *')", "name", "22004"),
    ("add_schedule('ns', 'a b', 't', cron => '* * * * *')", "name", "22023"),
    ("add_schedule('ns', repeat('n', 201), 't', cron => '* * * * *')", "name", "22001"),
    ("add_schedule('ns', 'n', 'bad type', cron => '* * * * *')", "type", "22023"),
    (
        "add_schedule('ns', 'n', 't', to_jsonb(repeat('x', 300000)), cron => '* * * * *')",
        "payload",
        "22001",
    ),
    ("add_schedule('ns', 'n', 't')", "cron", "22004"),
    ("add_schedule('ns', 'n', 't', cron => '* * * *')", "cron", "22023"),
    ("add_schedule('ns', 'n', 't', cron => '* * * * * * *')", "cron", "22023"),
    ("add_schedule('ns', 'n', 't', cron => '* * * * *', every => '1h')", "every", "22023"),
    ("add_schedule('ns', 'n', 't', every => '-1h')", "every", "22023"),
    ("add_schedule('ns', 'n', 't', rrule => 'every monday')", "rrule", "22023"),
    ("add_schedule('ns', 'n', 't', rrule => 'BYDAY=MO')", "rrule", "22023"),
    ("add_schedule('ns', 'n', 't', rrule => 'FREQ=DAILY')", "dtstart", "22004"),
    (
        "add_schedule('ns', 'n', 't', every => '1h', dtstart => '2030-01-01 09:00')",
        "dtstart",
        "22023",
    ),
    ("add_schedule('ns', 'n', 't', every => '1h', timezone => 'Europe/../x')", "timezone", "22023"),
    (
        "add_schedule('ns', 'n', 't', every => '1h', start_at => '2030-01-02Z',"
        " end_at => '2030-01-01Z')",
        "end_at",
        "22023",
    ),
    ("add_schedule('ns', 'n', 't', every => '1h', subject => '')", "subject", "22023"),
    ("add_schedule('ns', 'n', 't', every => '1h', max_attempts => 0)", "max_attempts", "22023"),
    ("add_schedule('ns', 'n', 't', every => '1h', catch_up => 'some')", "catch_up", "22023"),
    ("add_schedule('ns', 'n', 't', every => '1h', overlap => 'queue')", "overlap", "22023"),
    ("add_schedule('ns', 'n', 't', every => '1h', on_conflict => 'x')", "on_conflict", "22023"),
    ("pause_schedule('ns', '')", "name", "22004"),
    ("resume_schedule('nope', 'n')", "namespace", "22023"),
    ("remove_schedule('ns', 'a b')", "name", "22023"),
    ("schedule_request('ns', 12345)", "request_id", "P0002"),
]


@pytest.mark.parametrize(("call", "field", "sqlstate"), BAD_CALLS)
async def test_bad_schedule_input_names_its_field(
    pg_url: str, pg_schema: str, call: str, field: str, sqlstate: str
) -> None:
    app = AsyncApp(pg_url, "ns", clock=FrozenClock(NOW))
    await app.open()
    await app.close()
    with psycopg.connect(PG_URL, options=f"-c search_path={pg_schema}") as conn:
        with pytest.raises(psycopg.Error) as caught:
            conn.execute(f"SELECT * FROM {call}")
        error = caught.value.diag
        assert (error.sqlstate, error.column_name, error.message_detail) == (
            sqlstate,
            field,
            f"field: {field}",
        )
        conn.rollback()
        assert conn.execute("SELECT count(*) FROM sql_schedule_requests").fetchone() == (0,)


async def test_a_running_worker_applies_a_request_when_its_commit_wakes_it(
    pg_url: str, pg_schema: str
) -> None:
    """No round is asked for: the caller's commit sends the wake-up, and the running service
    applies the request (its re-check is 30 s away)."""
    app = AsyncApp(pg_url, "ns", clock=FrozenClock(NOW))
    await app.open()
    (changes,) = [s for s in app.worker().services if isinstance(s, ScheduleChanges)]
    rounds = 0
    round_done = asyncio.Event()
    once = changes.once

    async def counted() -> None:
        nonlocal rounds
        await once()
        rounds += 1
        round_done.set()

    changes.once = counted  # type: ignore[method-assign]
    stop = asyncio.Event()
    running = asyncio.create_task(changes.run(stop))
    try:
        await asyncio.wait_for(round_done.wait(), 20)  # the round at start: nothing pending
        round_done.clear()
        (request_id,) = _sql(
            pg_schema,
            "SELECT request_id FROM add_schedule('ns', 'hourly', 'tick', every => '1h')",
        )
        await asyncio.wait_for(round_done.wait(), 20)
        assert rounds == 2
        assert _sql(
            pg_schema, "SELECT status, outcome FROM schedule_request('ns', %s)", request_id
        )[:2] == ("applied", "created")
        assert (await app.schedules.get("hourly")).every is not None
    finally:
        stop.set()
        await running
        await app.close()
