"""The materialiser's pure planning step: which timers a due schedule needs, where it goes next."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from duetime.model import Schedule
from duetime.schedules import ScheduleRequest, schedule_from_new
from duetime.services.materializer import plan_advance

T0 = datetime(2025, 3, 8, 12, 0, tzinfo=UTC)
SECOND = timedelta(seconds=1)


def schedule(**fields: object) -> Schedule:
    request = ScheduleRequest(name="s", type="t", **fields)  # type: ignore[arg-type]
    return schedule_from_new(request.resolve("ns", T0, 20, 1000), 7, T0, version=3)


def due(advance_timers: object) -> list[str]:
    return [t.due_at.strftime("%H:%M:%S") for t in advance_timers]  # type: ignore[attr-defined]


def test_on_time_it_makes_everything_within_the_lookahead() -> None:
    every = schedule(every=2)  # 12:00:01, :03, :05 ...
    advance = plan_advance(every, T0, lookahead=5 * SECOND)
    assert due(advance.timers) == ["12:00:01", "12:00:03", "12:00:05"]
    assert (advance.schedule_id, advance.version) == (7, 3)
    assert advance.next_at == T0 + 7 * SECOND
    assert advance.after_at == advance.last_at == T0 + 5 * SECOND
    assert advance.timers[0].key == "schedule:s:2025-03-08T12:00:01Z"


def test_per_schedule_caps_one_round() -> None:
    advance = plan_advance(schedule(every=1), T0, lookahead=60 * SECOND, per_schedule=4)
    assert len(advance.timers) == 4
    assert advance.next_at == T0 + 5 * SECOND


def test_an_outage_follows_catch_up() -> None:
    base = schedule(cron="*/10 * * * *")  # next 12:10
    now = datetime(2025, 3, 8, 13, 5, tzinfo=UTC)
    latest = plan_advance(base, now)
    assert due(latest.timers) == ["13:00:00"]
    assert (latest.next_at, latest.after_at) == (now + timedelta(minutes=5), now)
    every = plan_advance(replace(base, catch_up="all"), now)
    assert due(every.timers) == [
        f"{h}:{m}0:00" for h, m in [(12, 1), *((12, i) for i in range(2, 6)), (13, 0)]
    ]
    none = plan_advance(replace(base, catch_up="none"), now)
    assert none.timers == ()
    assert none.next_at == now + timedelta(minutes=5)
    assert none.last_at is None


def test_capped_all_resumes_where_it_stopped() -> None:
    base = replace(schedule(cron="*/10 * * * *"), catch_up="all")
    now = datetime(2025, 3, 8, 13, 5, tzinfo=UTC)
    first = plan_advance(base, now, per_schedule=2)
    assert due(first.timers) == ["12:10:00", "12:20:00"]
    assert first.next_at == datetime(2025, 3, 8, 12, 30, tzinfo=UTC)
    assert first.after_at == datetime(2025, 3, 8, 12, 20, tzinfo=UTC)


def test_an_ended_schedule_has_no_next() -> None:
    ending = schedule(every=60, start_at=T0, end_at=T0 + timedelta(minutes=1))
    advance = plan_advance(ending, T0 + timedelta(minutes=1))
    assert due(advance.timers) == ["12:01:00"]  # created at 12:00: strictly after it
    assert advance.next_at is None
