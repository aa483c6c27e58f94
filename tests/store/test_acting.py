"""Acting as an operator, through the facade on both stores: a schedule's next occurrence run
now fires once (and not again when its instant comes), and an edit of a pending timer follows
the re-schedule rules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from duetime import AsyncApp, Event
from duetime.errors import Conflict, InvalidInput
from duetime.model import Status
from duetime.testing import AsyncHarness

START = datetime(2025, 3, 3, 10, 30, tzinfo=UTC)


async def test_run_next_now_fires_the_occurrence_once_and_the_schedule_moves_on(
    store_url: str,
) -> None:
    app = AsyncApp(database_url=store_url, namespace="ops")
    ran: list[str] = []

    @app.handler("report.hourly")
    async def report(event: Event) -> None:
        ran.append(event.key)

    async with AsyncHarness(app, start=START) as harness:
        await app.schedules.add("hourly", "report.hourly", cron="0 * * * *")
        timer = await app.schedules.run_next_now("hourly")
        assert timer.key == "schedule:hourly:2025-03-03T11:00:00Z"
        assert timer.run_at == START
        schedule = await app.schedules.get("hourly")
        assert schedule.next_at == datetime(2025, 3, 3, 12, tzinfo=UTC)
        await harness.run_due()
        assert ran == ["schedule:hourly:2025-03-03T11:00:00Z"]
        harness.travel_to("2025-03-03T11:00:00Z")  # its instant: nothing fires again
        await harness.run_due()
        assert ran == ["schedule:hourly:2025-03-03T11:00:00Z"]
        harness.travel_to("2025-03-03T12:00:00Z")  # and the next one fires as usual
        await harness.run_due()
        assert ran[1:] == ["schedule:hourly:2025-03-03T12:00:00Z"]
        await app.schedules.pause("hourly")
        with pytest.raises(Conflict, match="paused"):
            await app.schedules.run_next_now("hourly")


async def test_edit_changes_due_time_and_payload_and_keeps_the_rest(store_url: str) -> None:
    app = AsyncApp(database_url=store_url, namespace="ops")
    async with AsyncHarness(app, start=START):
        await app.schedule("mail.send", {"to": "a"}, delay="PT1H", key="m1", subject="user-1",
                           max_attempts=7, priority=3)  # fmt: skip
        moved = await app.timers.edit("m1", {"at": "2025-03-04T08:00:00Z"})
        assert (moved.due_at, moved.payload) == (datetime(2025, 3, 4, 8, tzinfo=UTC), {"to": "a"})
        edited = await app.timers.edit("m1", {"payload": {"to": "b"}})
        stored = await app.get("m1")
        assert stored == edited
        assert (stored.payload, stored.due_at) == ({"to": "b"}, datetime(2025, 3, 4, 8, tzinfo=UTC))
        assert (stored.subject, stored.max_attempts, stored.priority) == ("user-1", 7, 3)
        assert (await app.timers.edit("m1", {"delay": "PT10M"})).due_at == START + timedelta(
            minutes=10
        )
        with pytest.raises(InvalidInput) as bad:
            await app.timers.edit("m1", {"subject": "other"})
        assert bad.value.field == "subject"
        with pytest.raises(InvalidInput) as bad:
            await app.timers.edit("m1", {"at": "tomorrow-ish"})
        assert bad.value.field == "at"
        await app.cancel("m1")
        with pytest.raises(Conflict, match="cancelled"):
            await app.timers.edit("m1", {"payload": {}})
        assert (await app.get("m1")).status is Status.CANCELLED
