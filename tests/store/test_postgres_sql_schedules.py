"""Managing schedules from SQL (migrations 0030, 0031): add_schedule, pause_schedule,
resume_schedule and remove_schedule change the schedule in the caller's transaction and answer
as the Python API does; a worker checks what SQL cannot (what a rule means, the zone) and plans
the next occurrence, and a definition that fails ends visible with its reason."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
from storekit import NOW, PG_URL

from duetime import AsyncApp, FrozenClock
from duetime.app.sql_schedules import ScheduleChanges
from duetime.errors import Conflict, NotFound
from duetime.model import HELD_AT as HELD


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


def _json(schema: str, query: str, *params: Any) -> dict[str, Any]:
    """The answer of a schedule function as a dict of its columns."""
    with psycopg.connect(PG_URL, options=f"-c search_path={schema}") as conn:
        cursor = conn.execute(query, params)
        row = cursor.fetchone()
        assert row is not None
        assert cursor.description is not None
        conn.commit()
    return {column.name: value for column, value in zip(cursor.description, row, strict=True)}


def _request(schema: str, request_id: int) -> tuple[str, str]:
    status, outcome, _ = _sql(schema, "SELECT * FROM schedule_request('ns', %s)", request_id)
    return status, outcome


async def test_add_schedule_answers_created_updated_or_kept_in_the_callers_transaction(
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
        daily = (
            "SELECT * FROM add_schedule('ns', 'daily', 'report', %s::jsonb,"
            " cron => '0 9 * * MON-FRI', timezone => 'Europe/Paris', max_attempts => 5)"
        )
        made = _json(pg_schema, daily, '{"k": 1}')
        assert (made["schedule_name"], made["action"], made["status"]) == (
            "daily",
            "created",
            "pending",
        )
        shown = made["schedule"]
        assert (shown["id"], shown["cron"], shown["payload"], shown["max_attempts"]) == (
            made["schedule_id"],
            "0 9 * * MON-FRI",
            {"k": 1},
            5,
        )
        assert (shown["next_at"], shown["planned"], shown["active"]) == (None, False, True)
        stored = await app.schedules.get("daily")  # visible on commit, its occurrence unplanned
        assert (stored.id, stored.next_at) == (made["schedule_id"], HELD)
        assert _request(pg_schema, made["request_id"]) == ("pending", "created")
        with pytest.raises(Conflict):  # nothing to run before its rule is checked
            await app.schedules.run_next_now("daily")

        again = _json(pg_schema, daily, '{"k": 1}')
        assert (again["action"], again["status"], again["schedule_id"]) == (
            "kept",
            "applied",
            made["schedule_id"],
        )
        changed = _json(pg_schema, daily, '{"k": 2}')
        assert changed["action"] == "updated"
        await _apply(app)

        assert _request(pg_schema, made["request_id"]) == (
            "applied",
            "created; superseded by a later change",
        )
        assert _request(pg_schema, changed["request_id"]) == ("applied", "updated")
        planned = await app.schedules.get("daily")
        assert (planned.payload, planned.timezone, planned.max_attempts) == (
            {"k": 2},
            "Europe/Paris",
            5,
        )
        assert planned.next_at is not None
        assert planned.next_at < HELD
        # Once planned, a change of the payload alone needs no worker: the sequence stands.
        payload_only = _json(pg_schema, daily, '{"k": 3}')
        assert (payload_only["action"], payload_only["status"]) == ("updated", "applied")
        assert payload_only["schedule"]["next_at"] is not None
        assert (await app.schedules.get("daily")).next_at == planned.next_at
        kept = _json(
            pg_schema,
            "SELECT * FROM add_schedule('ns', 'daily', 'other', cron => '* * * * *',"
            " on_conflict => 'keep')",
        )
        assert (kept["action"], kept["schedule"]["type"]) == ("kept", "report")
        with psycopg.connect(PG_URL, options=f"-c search_path={pg_schema}") as conn:
            with pytest.raises(psycopg.errors.UniqueViolation) as exists:
                conn.execute(
                    "SELECT * FROM add_schedule('ns', 'daily', 'report', cron => '* * * * *',"
                    " on_conflict => 'error')"
                )
            assert exists.value.diag.column_name == "name"
        with pytest.raises(NotFound):
            await app.schedules.get("gone")  # rolled back: never made
        audit = _sql(
            pg_schema,
            "SELECT count(*), min(actor) FROM audit_log WHERE action = 'schedule_define'",
        )
        assert audit == (3, "python:sql:postgres")  # created, updated, updated: not the kept
    finally:
        await app.close()


async def test_a_rule_duetime_refuses_ends_visible_with_its_reason(
    pg_url: str, pg_schema: str
) -> None:
    """SQL checks a cron's syntax; what it means is duetime's to check. A new schedule that
    fails is left paused with nothing due, a changed one goes back to its definition: both
    with the reason on their request."""
    app = AsyncApp(pg_url, "ns", clock=FrozenClock(NOW))
    await app.open()
    try:
        _sql(pg_schema, "SELECT * FROM add_schedule('ns', 'daily', 'report', cron => '0 9 * * *')")
        (monthly,) = _sql(
            pg_schema,
            "SELECT request_id FROM add_schedule('ns', 'monthly', 'pay',"
            " rrule => 'FREQ=MONTHLY;BYDAY=MO;BYSETPOS=1', dtstart => '2025-03-03 09:00')",
        )
        (zone,) = _sql(
            pg_schema,
            "SELECT request_id FROM add_schedule('ns', 'mars', 't', every => '1h',"
            " timezone => 'Mars/Olympus_Mons')",
        )
        bad_new = _json(
            pg_schema, "SELECT * FROM add_schedule('ns', 'bad', 'report', cron => '61 * * * *')"
        )
        assert (bad_new["action"], bad_new["status"]) == ("created", "pending")
        await _apply(app)
        before = await app.schedules.get("daily")
        assert _request(pg_schema, monthly) == ("applied", "created")
        assert (await app.schedules.get("monthly")).calendar is not None
        again = _json(  # planned, the same rule is still the same definition
            pg_schema,
            "SELECT * FROM add_schedule('ns', 'monthly', 'pay',"
            " rrule => 'FREQ=MONTHLY;BYDAY=MO;BYSETPOS=1', dtstart => '2025-03-03 09:00')",
        )
        assert (again["action"], again["schedule"]["rrule"]) == (
            "kept",
            "FREQ=MONTHLY;BYDAY=MO;BYSETPOS=1",
        )

        status, outcome = _request(pg_schema, bad_new["request_id"])
        assert status == "failed"
        assert outcome.startswith("cron: ")
        assert outcome.endswith("the schedule is paused, with nothing due")
        bad = await app.schedules.get("bad")
        assert (bad.active, bad.next_at, bad.cron) == (False, None, "61 * * * *")
        status, outcome = _request(pg_schema, zone)
        assert (status, outcome.split(":")[0]) == ("failed", "timezone")

        bad_change = _json(
            pg_schema, "SELECT * FROM add_schedule('ns', 'daily', 'report', cron => '0 25 * * *')"
        )
        assert bad_change["action"] == "updated"
        worse = _json(  # changed again before a worker came: the definition to go back to stays
            pg_schema, "SELECT * FROM add_schedule('ns', 'daily', 'report', cron => '0 26 * * *')"
        )
        await _apply(app)
        assert _request(pg_schema, bad_change["request_id"]) == (
            "applied",
            "updated; superseded by a later change",
        )
        status, outcome = _request(pg_schema, worse["request_id"])
        assert status == "failed"
        assert outcome.startswith("cron: ")
        assert outcome.endswith("the schedule keeps its previous definition")
        after = await app.schedules.get("daily")
        assert (after.cron, after.active, after.next_at) == ("0 9 * * *", True, before.next_at)
    finally:
        await app.close()


async def test_pause_resume_and_remove_answer_as_the_python_api(
    pg_url: str, pg_schema: str
) -> None:
    app = AsyncApp(pg_url, "ns", clock=FrozenClock(NOW))
    await app.open()
    try:
        _sql(pg_schema, "SELECT * FROM add_schedule('ns', 'hourly', 'tick', every => '1h')")
        await _apply(app)
        paused = _json(pg_schema, "SELECT * FROM pause_schedule('ns', 'hourly')")
        assert (paused["action"], paused["schedule"]["active"]) == ("paused", False)
        assert (await app.schedules.get("hourly")).active is False
        again = _json(pg_schema, "SELECT * FROM pause_schedule('ns', 'hourly')")
        assert (again["action"], again["status"]) == ("kept", "applied")
        resumed = _json(pg_schema, "SELECT * FROM resume_schedule('ns', 'hourly')")
        assert resumed["action"] == "resumed"
        await _apply(app)
        assert _request(pg_schema, resumed["request_id"])[0] == "applied"
        running = await app.schedules.get("hourly")
        assert running.active is True
        assert running.next_at is not None
        assert running.next_at < HELD

        removed = _json(pg_schema, "SELECT * FROM remove_schedule('ns', 'hourly')")
        assert (removed["action"], removed["status"], removed["cancelled"]) == (
            "removed",
            "applied",
            0,
        )
        assert removed["schedule"]["name"] == "hourly"
        with pytest.raises(NotFound):
            await app.schedules.get("hourly")
        actions = _sql(
            pg_schema,
            "SELECT array_agg(action ORDER BY id) FROM audit_log WHERE actor LIKE '%%sql:%%'",
        )
        assert actions == (
            ["schedule_define", "schedule_pause", "schedule_resume", "schedule_delete"],
        )
    finally:
        await app.close()


async def test_the_apps_settings_are_the_caps_and_defaults_sql_obeys(
    pg_url: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An app opening the store writes its settings (here from the environment) for the SQL
    functions: another setting, another answer."""
    monkeypatch.setenv("DUETIME_MAX_PAYLOAD_BYTES", "64")
    monkeypatch.setenv("DUETIME_MAX_ATTEMPTS", "3")
    monkeypatch.setenv("DUETIME_MAX_SCHEDULES", "1")
    app = AsyncApp(pg_url, "ns", clock=FrozenClock(NOW))
    await app.open()
    await app.close()
    payload = '{"text": "%s"}' % ("x" * 100)
    with psycopg.connect(PG_URL, options=f"-c search_path={pg_schema}") as conn:
        with pytest.raises(psycopg.errors.StringDataRightTruncation) as caught:
            conn.execute("SELECT * FROM schedule('ns', 't', %s::jsonb, delay => '1h')", (payload,))
        assert caught.value.diag.column_name == "payload"
        conn.rollback()
        conn.execute("SELECT * FROM schedule('ns', 't', delay => '1h', key => 'k')")
        assert conn.execute("SELECT max_attempts FROM timers WHERE key = 'k'").fetchone() == (3,)
        conn.execute("SELECT * FROM add_schedule('ns', 'one', 't', every => '1h')")
        with pytest.raises(psycopg.errors.ProgramLimitExceeded) as capped:
            conn.execute("SELECT * FROM add_schedule('ns', 'two', 't', every => '1h')")
        assert capped.value.diag.column_name == "name"
        conn.rollback()

    larger = {"max_payload_bytes": 4096, "max_attempts": 7, "max_schedules": 5}
    app = AsyncApp(pg_url, "ns", clock=FrozenClock(NOW), **larger)
    await app.open()
    await app.close()
    with psycopg.connect(PG_URL, options=f"-c search_path={pg_schema}") as conn:
        conn.execute("SELECT * FROM schedule('ns', 't', %s::jsonb, delay => '1h')", (payload,))
        conn.execute("SELECT * FROM schedule('ns', 't', delay => '1h', key => 'k2')")
        conn.execute("SELECT * FROM add_schedule('ns', 'one', 't', every => '1h')")
        conn.execute("SELECT * FROM add_schedule('ns', 'two', 't', every => '1h')")
        assert conn.execute("SELECT max_attempts FROM timers WHERE key = 'k2'").fetchone() == (7,)
        conn.commit()


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
    ("add_schedule('ns', 'n', 't', every => '1 month')", "every", "22023"),
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
    ("add_schedule('ns', 'n', 't', every => '1h', timezone => NULL)", "timezone", "22023"),
    ("add_schedule('ns', 'n', 't', every => '1h', start_at => '1960-01-01Z')", "start_at", "22023"),
    (
        "add_schedule('ns', 'n', 't', rrule => 'FREQ=DAILY', dtstart => '9500-01-01 09:00')",
        "dtstart",
        "22023",
    ),
    ("add_schedule('ns', 'n', NULL, every => '1h')", "type", "22004"),
    ("pause_schedule('ns', '')", "name", "22004"),
    ("pause_schedule('nope', 'n')", "namespace", "22023"),
    ("pause_schedule('ns', 'missing')", "name", "P0002"),
    ("resume_schedule('nope', 'n')", "namespace", "22023"),
    ("resume_schedule('ns', repeat('n', 201))", "name", "22001"),
    ("resume_schedule('ns', 'missing')", "name", "P0002"),
    ("remove_schedule('ns', 'a b')", "name", "22023"),
    ("remove_schedule('nope', 'n')", "namespace", "22023"),
    ("remove_schedule('ns', 'missing')", "name", "P0002"),
    ("schedule_request('nope', 1)", "namespace", "22023"),
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
        assert (error.message_primary or "").startswith(f"{field}: ")
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


async def test_a_schedule_duetime_cannot_plan_ends_failed_not_stuck(
    pg_url: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error with no field to blame fails the change (paused, with the reason), instead of
    leaving it pending for every round to trip over again."""
    import duetime.app.sql_planning as planning

    def overflow(*args: object) -> None:
        raise OverflowError("date value out of range")

    app = AsyncApp(pg_url, "ns", clock=FrozenClock(NOW))
    await app.open()
    try:
        (request_id,) = _sql(
            pg_schema, "SELECT request_id FROM add_schedule('ns', 'far', 't', every => '1h')"
        )
        monkeypatch.setattr(planning, "first_after", overflow)
        await _apply(app)
        status, outcome = _request(pg_schema, request_id)
        assert status == "failed"
        assert outcome.startswith("far: duetime could not plan it (date value out of range)")
        assert (await app.schedules.get("far")).active is False
    finally:
        await app.close()
