"""The SQL functions across an upgrade: a schema made by the first version of the schedule
functions (migrations 0029, 0030) keeps its callers working once ``duetime migrate`` applies the
later ones: the same calls, the columns they read, the grants given, and the requests stored
but not yet applied."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from storekit import NOW, PG_URL

from duetime import AsyncApp, FrozenClock
from duetime.app.sql_schedules import ScheduleChanges


def _as(schema: str, user: str = "postgres") -> psycopg.Connection[Any]:
    return psycopg.connect(PG_URL, user=user, autocommit=True, options=f"-c search_path={schema}")


OLD_CALL = (
    "SELECT request_id, schedule_name, status FROM add_schedule('ns', %s, 'report',"
    " cron => '0 9 * * *', timezone => 'Europe/Paris')"
)


async def test_old_calls_grants_and_pending_requests_survive_the_upgrade(
    pg_fresh_url: str, pg_fresh_schema: str, login_role: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import duetime.store.postgres.schema as schema

    role = login_role

    first = [m for m in schema.MIGRATIONS if m[0] <= 30]
    monkeypatch.setattr(schema, "MIGRATIONS", first)
    app = AsyncApp(pg_fresh_url, "ns", clock=FrozenClock(NOW))
    await app.open()
    await app.sql.grant(role, ["ns"])
    with _as(pg_fresh_schema, role) as conn:
        (old_request, name, status) = conn.execute(OLD_CALL, ("before",)).fetchone() or ()
    assert (name, status) == ("before", "pending")
    await app.close()
    monkeypatch.undo()

    app = AsyncApp(pg_fresh_url, "ns", clock=FrozenClock(NOW))
    await app.open()  # migrates
    try:
        with _as(pg_fresh_schema, role) as conn:  # the grant holds for the new signatures
            after = conn.execute(OLD_CALL, ("after",)).fetchone()
            assert after is not None
            assert after[1:] == ("after", "pending")
            paused = conn.execute(
                "SELECT request_id, schedule_name, status FROM pause_schedule('ns', 'after')"
            ).fetchone()
            assert paused is not None
            assert paused[1:] == ("after", "pending")  # its rule still to be checked
        (changes,) = [s for s in app.worker().services if isinstance(s, ScheduleChanges)]
        await changes.once()
        with _as(pg_fresh_schema) as conn:
            # Stored by the first version, applied by the worker the first version's way.
            assert conn.execute(
                "SELECT status, outcome FROM schedule_request('ns', %s)", (old_request,)
            ).fetchone() == ("applied", "created")
            assert conn.execute(
                "SELECT status, outcome FROM schedule_request('ns', %s)", (paused[0],)
            ).fetchone() == ("applied", "paused")
        before = await app.schedules.get("before")
        assert (before.cron, before.timezone, before.active) == ("0 9 * * *", "Europe/Paris", True)
        assert (await app.schedules.get("after")).active is False
    finally:
        await app.close()
