"""The materialiser's pure planning step: which timers a due schedule needs, where it goes next."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import cast

from hypothesis import given, settings
from hypothesis import strategies as st

from duetime import FrozenClock
from duetime.model import Schedule
from duetime.model.schedules import DUE_COLUMNS, DueSchedule
from duetime.schedules import ScheduleRequest, schedule_from_new
from duetime.services.materializer import Materializer, PlanCache, plan_advance
from duetime.store import Store

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


ALIKE_RULES = (
    {"cron": "0 9 * * *", "timezone": "Europe/London"},
    {"cron": "30 1 * * *", "timezone": "Europe/London"},  # the 30th of March's gap
    {"cron": "*/20 * * * *", "timezone": "America/New_York"},
    {"every": 3600},
    {"every": 5400},
)


@st.composite
def due_alike(draw: st.DrawFn) -> DueSchedule:
    """A due row from a handful of rules and positions (many alike), each its own id, name,
    anchor (when made) and catch-up."""
    fields = dict(draw(st.sampled_from(ALIKE_RULES)))
    fields["catch_up"] = draw(st.sampled_from(["latest", "all", "none"]))
    fields["catch_up_grace"] = draw(st.sampled_from([0, 600, 86_400]))
    made = T0 + draw(st.sampled_from([0, 1, 7_200])) * SECOND
    request = ScheduleRequest(name=f"s{draw(st.integers(0, 10**6))}", type="t", **fields)  # type: ignore[arg-type]
    new = request.resolve("ns", made, 20, 1000)
    row = schedule_from_new(new, draw(st.integers(1, 10**6)), made, version=draw(st.integers(1, 9)))
    moved = draw(st.sampled_from([None, timedelta(hours=5), timedelta(days=20)]))
    if moved is not None and row.next_at is not None:
        row = replace(
            row,
            after_at=row.next_at + moved,
            next_at=None if moved.days else row.next_at + moved + SECOND,
            last_at=row.next_at,
        )
    named = {"run_window": "window"}  # the column's name for the schedule's field
    return DueSchedule(*(getattr(row, named.get(name, name)) for name in DUE_COLUMNS))


@given(
    rounds=st.lists(
        st.tuples(st.lists(due_alike(), max_size=12), st.integers(0, 40 * 86_400)),
        max_size=4,
    )
)
@settings(deadline=None, max_examples=150)
def test_plans_made_alike_in_a_round_equal_fresh_ones(
    rounds: list[tuple[list[DueSchedule], int]],
) -> None:
    worker = Materializer(
        cast(Store, SimpleNamespace(schedules=None)), FrozenClock(T0), "ns", per_schedule=5
    )
    cache = PlanCache()
    for due_rows, seconds in rounds:
        now = T0 + seconds * SECOND
        twins = [
            r._replace(id=r.id + 1, version=r.version + 1, name=r.name + "b") for r in due_rows
        ]
        # Alike in rule and position (one plan, their own keys), and alike but for last_at.
        others = [r._replace(id=r.id + 2, last_at=None if r.last_at else T0) for r in due_rows]
        # A cron schedule made at another instant (its anchor) is alike: cron does not read it.
        anchored = [r._replace(id=r.id + 3, anchor_at=r.anchor_at + SECOND) for r in due_rows]
        due_rows = [*due_rows, *twins, *others, *anchored]
        fresh = [plan_advance(row, now, per_schedule=5) for row in due_rows]
        assert worker.plan(due_rows, now, cache=cache) == fresh
