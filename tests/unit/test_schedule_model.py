"""Schedule requests: validation naming the field, occurrence keys, revisions, previews."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from duetime.errors import InvalidCron, InvalidInput, UnknownTimezone
from duetime.model import Schedule
from duetime.revisions import preview_occurrences, revise
from duetime.schedules import (
    ScheduleRequest,
    check_schedule_name,
    occurrence_key,
    schedule_from_new,
)
from duetime.store.cursors import decode_name_cursor, encode_name_cursor
from duetime.timemath.recurrence import next_after, parse_recurrence

NOW = datetime(2025, 3, 8, 12, 0, 0, 250_000, tzinfo=UTC)


def stored(**fields: object) -> Schedule:
    fields.setdefault("name", "s")
    fields.setdefault("type", "t")
    request = ScheduleRequest(**fields)  # type: ignore[arg-type]
    return schedule_from_new(request.resolve("ns", NOW, 20, 1000), 1, NOW)


def test_occurrence_keys_are_utc_iso_with_z() -> None:
    instant = datetime(2025, 3, 9, 7, 0, tzinfo=UTC)
    assert occurrence_key("daily", instant) == "schedule:daily:2025-03-09T07:00:00Z"
    fine = instant + timedelta(microseconds=5)
    assert occurrence_key("a:b", fine) == "schedule:a:b:2025-03-09T07:00:00.000005Z"


@pytest.mark.parametrize("name", ["birthday:user-42", "a", "x.y@z+1=2", "_", "A" * 200])
def test_good_names(name: str) -> None:
    assert check_schedule_name(name) == name


@pytest.mark.parametrize("name", ["", "-x", "a b", "a/b", "é", "A" * 201, None, 3])
def test_bad_names_name_the_field(name: object) -> None:
    with pytest.raises(InvalidInput) as caught:
        check_schedule_name(name)
    assert caught.value.field == "name"


@pytest.mark.parametrize(
    ("fields", "field", "error"),
    [
        ({}, "cron", InvalidInput),
        ({"cron": "* * *"}, "cron", InvalidCron),
        ({"cron": "0 9 * * *", "every": 60}, "every", InvalidInput),
        ({"every": "P1M"}, "every", InvalidInput),
        ({"every": 0.5}, "every", InvalidInput),
        ({"every": 60, "timezone": "Mars/Olympus"}, "timezone", UnknownTimezone),
        ({"every": 60, "catch_up": "some"}, "catch_up", InvalidInput),
        ({"every": 60, "on_gap": "later"}, "on_gap", InvalidInput),
        ({"every": 60, "start_at": "2025-03-09T09:00"}, "start_at", InvalidInput),
        ({"every": 60, "end_at": "yesterday"}, "end_at", InvalidInput),
        ({"every": 60, "end_at": "2025-01-01T00:00Z"}, "end_at", InvalidInput),
        ({"every": 60, "max_attempts": 0}, "max_attempts", InvalidInput),
        ({"every": 60, "payload": {1, 2}}, "payload", InvalidInput),
        ({"every": 60, "type": "bad type"}, "type", InvalidInput),
        ({"every": 60, "subject": ""}, "subject", InvalidInput),
        ({"every": 60, "active": "yes"}, "active", InvalidInput),
    ],
)
def test_bad_requests_name_the_field(
    fields: dict[str, object], field: str, error: type[Exception]
) -> None:
    with pytest.raises(error) as caught:
        stored(**fields)
    assert getattr(caught.value, "field", None) == field


def test_from_dict_refuses_unknown_fields() -> None:
    with pytest.raises(InvalidInput, match="colour"):
        ScheduleRequest.from_dict({"name": "a", "type": "t", "colour": "red"})
    with pytest.raises(InvalidInput, match="type"):
        ScheduleRequest.from_dict({"name": "a"})
    request = ScheduleRequest.from_dict({"name": "a", "type": "t", "every": "PT1M"})
    assert request.every == "PT1M"


def test_new_schedules_start_after_now() -> None:
    cron = stored(cron="30 2 * * *", timezone="America/New_York")
    assert cron.next_at == datetime(2025, 3, 9, 7, 0, tzinfo=UTC)  # the gap: 03:00 EDT
    assert (cron.after_at, cron.timezone) == (NOW, "America/New_York")
    interval = stored(every="PT10M")
    assert interval.anchor_at == interval.next_at == datetime(2025, 3, 8, 12, 0, 1, tzinfo=UTC)
    started = stored(every="PT10M", start_at="2025-03-08T11:55:00+00:00")
    assert started.next_at == datetime(2025, 3, 8, 12, 5, tzinfo=UTC)


def test_revising_with_the_same_definition_changes_nothing() -> None:
    current = stored(cron="0 9 * * *", payload={"a": 1})
    revision = revise(current, ScheduleRequest.of(current), NOW + timedelta(hours=1), 20, 1000)
    assert not revision.changed
    assert revision.schedule == current


def test_a_new_rule_starts_from_now_and_releases_early_timers() -> None:
    current = stored(every=60)
    ahead = replace(current, after_at=NOW + timedelta(seconds=30))  # materialised ahead
    later = NOW + timedelta(seconds=10)
    revision = revise(ahead, replace(ScheduleRequest.of(ahead), every=90), later, 20, 1000)
    assert revision.changed
    assert revision.release_after == later
    assert revision.schedule.after_at == later
    assert revision.schedule.anchor_at == datetime(2025, 3, 8, 12, 0, 11, tzinfo=UTC)
    assert revision.schedule.next_at == revision.schedule.anchor_at


def test_a_payload_change_rewinds_to_remake_early_timers() -> None:
    current = stored(every=60)
    ahead = replace(current, after_at=NOW + timedelta(seconds=30), version=4)
    later = NOW + timedelta(seconds=10)
    revision = revise(ahead, replace(ScheduleRequest.of(ahead), payload=[1]), later, 20, 1000)
    assert revision.release_after == later
    assert revision.schedule.after_at == later
    assert revision.schedule.next_at == current.anchor_at + timedelta(seconds=60)
    assert (revision.schedule.payload, revision.schedule.version) == ([1], 4)


def test_pause_and_resume() -> None:
    current = replace(stored(cron="*/5 * * * *"), after_at=NOW + timedelta(minutes=1))
    paused = revise(current, replace(ScheduleRequest.of(current), active=False), NOW, 20, 1000)
    assert (paused.schedule.active, paused.release_after) == (False, NOW)
    much_later = NOW + timedelta(hours=3)
    resumed = revise(
        paused.schedule,
        replace(ScheduleRequest.of(paused.schedule), active=True),
        much_later,
        20,
        1000,
    )
    assert resumed.release_after is None
    assert resumed.schedule.after_at == much_later
    assert resumed.schedule.next_at == datetime(2025, 3, 8, 15, 5, tzinfo=UTC)


def test_an_update_may_end_a_schedule() -> None:
    current = stored(every=60)
    ended = replace(ScheduleRequest.of(current), end_at="2025-01-01T00:00:00Z")
    revision = revise(current, ended, NOW, 20, 1000)
    assert revision.schedule.next_at is None


def test_preview_of_rules_and_of_stored_schedules() -> None:
    after = datetime(2025, 11, 1, 12, 0, tzinfo=UTC)
    fall = preview_occurrences(
        None, cron="30 1 * * *", timezone="America/New_York", after=after, count=3, now=NOW
    )
    assert fall == [
        datetime(2025, 11, 2, 5, 30, tzinfo=UTC),  # 01:30 EDT, the first of two
        datetime(2025, 11, 3, 6, 30, tzinfo=UTC),
        datetime(2025, 11, 4, 6, 30, tzinfo=UTC),
    ]
    both = preview_occurrences(
        None,
        cron="30 1 * * *",
        timezone="America/New_York",
        on_overlap="both",
        after=after,
        count=2,
        now=NOW,
    )
    assert both[1] == datetime(2025, 11, 2, 6, 30, tzinfo=UTC)
    every = preview_occurrences(None, every="PT1H", count=2, now=NOW)
    assert every == [
        datetime(2025, 3, 8, 12, 0, 1, tzinfo=UTC),
        datetime(2025, 3, 8, 13, 0, 1, tzinfo=UTC),
    ]
    schedule = stored(cron="0 * * * *")
    assert preview_occurrences(schedule, count=1, now=NOW) == [schedule.next_at]
    assert preview_occurrences(replace(schedule, next_at=None), count=1, now=NOW) == []
    with pytest.raises(InvalidInput) as caught:
        preview_occurrences(None, cron="0 * * * *", count=0, now=NOW)
    assert caught.value.field == "count"


def test_name_cursors_round_trip_and_refuse_garbage() -> None:
    assert decode_name_cursor(encode_name_cursor("a:b")) == "a:b"
    assert decode_name_cursor(None) == ""
    with pytest.raises(InvalidInput):
        decode_name_cursor(encode_name_cursor("x").replace("b", "c", 1) + "!!")


@pytest.mark.parametrize(
    "instant",
    ["9999-12-31T23:59:59Z", "1969-12-31T23:59:59Z", "0001-01-01T00:00:00+01:00"],
)
def test_instants_out_of_range_are_refused_not_crashes(instant: str) -> None:
    with pytest.raises(InvalidInput) as error:
        preview_occurrences(None, every="PT1S", after=instant, now=NOW)
    assert error.value.field == "after"
    with pytest.raises(InvalidInput) as error:
        ScheduleRequest(name="s", type="t", every=60, start_at=instant).resolve("ns", NOW, 20, 1000)
    assert error.value.field == "start_at"


def test_the_package_exports_the_schedule_types() -> None:
    import duetime

    assert duetime.Schedule is Schedule
    assert duetime.ScheduleRequest is ScheduleRequest
    assert {"Schedule", "ScheduleRequest"} <= set(duetime.__all__)


def test_a_rule_resolved_in_an_earlier_batch_resolves_as_a_fresh_one() -> None:
    """Rules parsed in one batch are reused by the next (another ``now``): same results, and
    the same refusal once the rule's end is past."""
    later = NOW + timedelta(days=3)
    request = ScheduleRequest(
        name="s",
        type="t",
        cron="30 9 * * *",
        timezone="Asia/Kathmandu",
        end_at=NOW + timedelta(days=2),
    )
    first = request.resolve("ns", NOW, 20, 1000, rules={})
    again = request.resolve("ns", NOW + timedelta(hours=1), 20, 1000, rules={})
    assert again.recurrence == first.recurrence
    assert again.next_at == first.next_at == datetime(2025, 3, 9, 3, 45, tzinfo=UTC)
    with pytest.raises(InvalidInput) as refused:
        request.resolve("ns", later, 20, 1000, rules={})
    assert refused.value.field == "end_at"
    every = ScheduleRequest(name="s", type="t", every=90)
    assert (
        every.resolve("ns", later, 20, 1000).next_at
        == every.resolve("ns", later, 20, 1000, rules={}).next_at
        == later.replace(microsecond=0) + timedelta(seconds=1)
    )


@settings(max_examples=200, deadline=None, database=None)
@given(
    cron=st.sampled_from(("30 2 * * *", "0 1 * * 0", "*/45 * * * *", "0 0 29 2 *", "15 9 * * *")),
    zone=st.sampled_from(("America/New_York", "Europe/London", "Australia/Lord_Howe", "UTC")),
    offsets=st.lists(st.integers(0, 400 * 86_400_000), min_size=1, max_size=12),
)
def test_batches_at_any_instants_resolve_as_fresh_ones(
    cron: str, zone: str, offsets: list[int]
) -> None:
    """The first occurrence remembered from an earlier batch is the fresh one at each later
    (or earlier) batch's instant, around DST changes too."""
    request = ScheduleRequest(name="s", type="t", cron=cron, timezone=zone)
    start = datetime(2025, 1, 1, tzinfo=UTC)
    for offset in offsets:
        now = start + timedelta(milliseconds=offset)
        rule = parse_recurrence(cron=cron, timezone=zone, now=now)
        assert request.resolve("ns", now, 20, 1000, rules={}).next_at == next_after(rule, now)
