"""The pure parts of retention and the event log: the filter, ``since``, cursors, settings."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from duetime.config import Settings
from duetime.errors import InvalidInput
from duetime.event_filters import event_filter, instant_or_ago
from duetime.model.history import EventFilter, RetentionPolicy
from duetime.store.cursors import decode_event_cursor, encode_event_cursor
from duetime.timemath.durations import months_between

NOW = datetime(2025, 3, 31, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("PT1H", NOW - timedelta(hours=1)),
        ("pt90m", NOW - timedelta(minutes=90)),
        ("P7D", NOW - timedelta(days=7)),
        ("P1M", datetime(2025, 2, 28, 12, 0, tzinfo=UTC)),  # calendar month, day clamped
        ("P1Y", datetime(2024, 3, 31, 12, 0, tzinfo=UTC)),
        (timedelta(seconds=30), NOW - timedelta(seconds=30)),
        ("2025-03-01T00:00:00Z", datetime(2025, 3, 1, tzinfo=UTC)),
        ("2025-03-01T09:00:00+09:00", datetime(2025, 3, 1, tzinfo=UTC)),
        (datetime(2025, 3, 1, 1, tzinfo=UTC), datetime(2025, 3, 1, 1, tzinfo=UTC)),
    ],
)
def test_since_is_an_instant_or_that_long_ago(
    given: str | timedelta | datetime, expected: datetime
) -> None:
    assert instant_or_ago(given, NOW, "since") == expected


@pytest.mark.parametrize(
    "given",
    ["yesterday", "", "2025-03-01T00:00:00", "P", "PT", "-PT1H", "P1X", "2025-02-30T00:00:00Z",
     "P20000Y", "x" * 100, datetime(2025, 3, 1), timedelta(seconds=-1), 3600],
)  # fmt: skip
def test_a_bad_since_is_refused_naming_the_field(given: object) -> None:
    with pytest.raises(InvalidInput) as caught:
        instant_or_ago(given, NOW, "since")  # type: ignore[arg-type]
    assert caught.value.field == "since"


def test_the_filter_checks_every_field() -> None:
    assert event_filter("order.*", "PT1H", None, NOW) == EventFilter(
        "order.*", NOW - timedelta(hours=1), None
    )
    assert event_filter(None, None, "2025-03-31T00:00:00Z", NOW).until == datetime(
        2025, 3, 31, tzinfo=UTC
    )
    for bad_type in ["order.[", "", "a b", "order.?", "x" * 201]:
        with pytest.raises(InvalidInput) as caught:
            event_filter(bad_type, None, None, NOW)
        assert caught.value.field == "type"
    empty = event_filter(None, "PT1H", "PT2H", NOW)  # until before since: lists nothing
    assert empty.until is not None
    assert empty.since is not None
    assert empty.until < empty.since
    with pytest.raises(InvalidInput) as caught:
        event_filter(None, None, "soon", NOW)
    assert caught.value.field == "until"


def test_cursors_round_trip_and_foreign_ones_are_refused() -> None:
    at = datetime(2025, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)
    assert decode_event_cursor(encode_event_cursor(at, 42)) == (at, 42)
    assert decode_event_cursor(None) is None
    assert decode_event_cursor("") is None
    for bad in ["garbage!", "aWQ6NA", encode_event_cursor(at, 1)[:-3]]:
        with pytest.raises(InvalidInput) as caught:
            decode_event_cursor(bad)
        assert caught.value.field == "cursor"


def test_months_between_counts_utc_months() -> None:
    starts = months_between(
        datetime(2024, 11, 30, 23, tzinfo=UTC), datetime(2025, 2, 1, tzinfo=UTC)
    )
    assert [(m.year, m.month, m.day) for m in starts] == [
        (2024, 11, 1),
        (2024, 12, 1),
        (2025, 1, 1),
        (2025, 2, 1),
    ]


def test_a_policy_must_archive_before_it_deletes() -> None:
    with pytest.raises(InvalidInput) as caught:
        RetentionPolicy(retention=timedelta(hours=1), archive_after=timedelta(hours=1))
    assert caught.value.field == "archive_after"
    with pytest.raises(InvalidInput) as caught:
        RetentionPolicy(retention=timedelta(0))
    assert caught.value.field == "retention"


def test_retention_settings_from_the_environment() -> None:
    settings = Settings.from_env(
        {"DUETIME_RETENTION": "P6M", "DUETIME_ARCHIVE_AFTER": "PT2H", "DUETIME_LEASE": "PT1M"}
    )
    assert settings.retention == timedelta(days=186)  # a month counts 31 days
    assert settings.archive_after == timedelta(hours=2)
    assert settings.lease == timedelta(minutes=1)
    assert settings.maintenance_interval == timedelta(seconds=60)
    assert Settings.from_env({}, retention="P7D", archive_after=60).archive_after == timedelta(
        minutes=1
    )


@pytest.mark.parametrize(
    ("env", "field"),
    [
        ({"DUETIME_RETENTION": "soon"}, "DUETIME_RETENTION"),
        ({"DUETIME_RETENTION": "P1X"}, "DUETIME_RETENTION"),
        ({"DUETIME_RETENTION": "0"}, "retention"),
        ({"DUETIME_ARCHIVE_AFTER": "P31D"}, "archive_after"),
        ({"DUETIME_MAINTENANCE_INTERVAL": "-5"}, "DUETIME_MAINTENANCE_INTERVAL"),
        ({"DUETIME_RETENTION": "P101Y"}, "DUETIME_RETENTION"),
        ({"DUETIME_BACKOFF_CAP": "86000000000000"}, "DUETIME_BACKOFF_CAP"),
        ({"DUETIME_MAINTENANCE_INTERVAL": "nan"}, "DUETIME_MAINTENANCE_INTERVAL"),
    ],
)
def test_bad_retention_settings_name_the_field(env: dict[str, str], field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        Settings.from_env(env)
    assert caught.value.field == field


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"backoff_cap": timedelta(days=40_000)}, "backoff_cap"),
        ({"backoff_cap": 8.6e13}, "backoff_cap"),
        ({"retention": -timedelta(seconds=1)}, "retention"),
    ],
)
def test_duration_settings_are_bounded(overrides: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        Settings.from_env({}, **overrides)
    assert caught.value.field == field
