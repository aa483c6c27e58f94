"""The operator's pure parts: the activity window and series, the timer filter, bulk actions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from duetime.errors import InvalidInput
from duetime.event_filters import activity_series, activity_window
from duetime.model import Status, TimerFilter
from duetime.model.history import ActivityCount, ActivityMinute
from duetime.timer_filters import check_action, timer_filter

NOW = datetime(2030, 3, 15, 13, 7, 42, 500_000, tzinfo=UTC)


def test_the_window_ends_with_the_current_minute() -> None:
    since, until = activity_window(NOW, 60)
    assert until == datetime(2030, 3, 15, 13, 8, tzinfo=UTC)
    assert since == until - timedelta(hours=1)
    for bad in (0, 1441, True, 2.5):
        with pytest.raises(InvalidInput) as caught:
            activity_window(NOW, bad)  # type: ignore[arg-type]
        assert caught.value.field == "minutes"


def test_the_series_has_every_minute_and_merges_statuses() -> None:
    since = datetime(2030, 3, 15, 13, 0, tzinfo=UTC)
    counts = [
        ActivityCount(1, "done", 3, 300.0, 200.0),
        ActivityCount(1, "dead", 1, 900.0, 900.0),
        ActivityCount(7, "done", 1, 5.0, 5.0),  # outside a 5-minute window: left out
    ]
    series = activity_series(counts, since, 5)
    assert [m.start for m in series] == [since + timedelta(minutes=n) for n in range(5)]
    assert series[0] == ActivityMinute(since)
    busy = series[1]
    assert (busy.fired, busy.by_status) == (4, {"done": 3, "dead": 1})
    assert (busy.lateness_mean_ms, busy.lateness_max_ms) == (300.0, 900.0)
    assert busy.to_dict()["start"] == "2030-03-15T13:01:00Z"


def test_the_filter_reads_each_field_and_names_a_bad_one() -> None:
    found = timer_filter(status="dead", type="order.*", subject="u1", due_from="PT1H", now=NOW)
    assert found == TimerFilter("u1", Status.DEAD, "order.*", NOW - timedelta(hours=1), None)
    cases = {
        "status": {"status": "zombie"},
        "type": {"type": "no spaces"},
        "due_from": {"due_from": "tomorrow"},
        "due_until": {"due_until": "next week"},
    }
    for field, fields in cases.items():
        with pytest.raises(InvalidInput) as caught:
            timer_filter(**fields, now=NOW)
        assert caught.value.field == field
    # A range that ends before it starts is empty: it takes no timer, and is no error.
    empty = timer_filter(due_from="2030-01-02T00:00:00Z", due_until="2030-01-01T00:00:00Z", now=NOW)
    assert empty.due_until is not None
    assert empty.due_from is not None
    assert empty.due_until < empty.due_from


def test_bulk_actions_are_a_closed_set() -> None:
    assert [check_action(a) for a in ("cancel", "replay", "run_now", "delete")] == [
        "cancel",
        "replay",
        "run_now",
        "delete",
    ]
    with pytest.raises(InvalidInput) as caught:
        check_action("purge")
    assert caught.value.field == "action"
