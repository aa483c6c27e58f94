"""ISO 8601 durations: calendar parts on the wall clock, exact parts in real time (hand-checked)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from duetime.errors import InvalidInput, NonexistentLocalTime
from duetime.timemath.durations import CalendarDuration, add_duration, add_months, parse_duration
from duetime.timemath.tzmath import load_zone


def z(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


NEW_YORK = load_zone("America/New_York")


@pytest.mark.parametrize(
    ("text", "months", "days", "clock"),
    [
        ("PT90S", 0, 0, timedelta(seconds=90)),
        ("P15D", 0, 15, timedelta(0)),
        ("P1M", 1, 0, timedelta(0)),
        # 1Y2M = 14 months; 4H5M6.5S = 14400 + 300 + 6.5 = 14706.5 s.
        ("P1Y2M3DT4H5M6.5S", 14, 3, timedelta(seconds=14706.5)),
        ("P2W", 0, 14, timedelta(0)),
        # PT360H is 15 days of *exact* time, not 15 calendar days.
        ("PT360H", 0, 0, timedelta(hours=360)),
        ("PT1.5H", 0, 0, timedelta(minutes=90)),
        ("PT0,25S", 0, 0, timedelta(milliseconds=250)),
        ("pt5m", 0, 0, timedelta(minutes=5)),
        (" PT5M ", 0, 0, timedelta(minutes=5)),
        ("PT0S", 0, 0, timedelta(0)),
        ("P100Y", 1200, 0, timedelta(0)),
        ("90", 0, 0, timedelta(seconds=90)),
        ("1.5", 0, 0, timedelta(seconds=1.5)),
    ],
)
def test_parse_iso(text: str, months: int, days: int, clock: timedelta) -> None:
    assert parse_duration(text) == CalendarDuration(months, days, clock)


def test_parse_numbers_and_timedeltas_are_exact() -> None:
    assert parse_duration(90) == CalendarDuration(clock=timedelta(seconds=90))
    assert parse_duration(0.5) == CalendarDuration(clock=timedelta(milliseconds=500))
    # A timedelta of 15 days is 15 x 24 h of real time, never calendar days.
    duration = parse_duration(timedelta(days=15))
    assert duration == CalendarDuration(clock=timedelta(days=15))
    assert not duration.is_calendar


def test_is_calendar() -> None:
    assert parse_duration("P1D").is_calendar
    assert parse_duration("P1M").is_calendar
    assert parse_duration("P1W").is_calendar
    assert not parse_duration("PT24H").is_calendar
    assert not parse_duration("P0D").is_calendar


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("P1Y2M3DT4H5M6.5S", "P1Y2M3DT4H5M6.5S"),
        ("PT90S", "PT1M30S"),
        ("P2W", "P14D"),
        ("PT0S", "PT0S"),
        ("P12M", "P1Y"),
        ("PT0.000001S", "PT0.000001S"),
    ],
)
def test_isoformat_round_trips(text: str, canonical: str) -> None:
    duration = parse_duration(text)
    assert duration.isoformat() == canonical
    assert parse_duration(canonical) == duration


@pytest.mark.parametrize(
    "value",
    [
        "",
        "   ",
        "P",
        "PT",
        "P1DT",
        "T5M",
        "5M",
        "PT5",
        "1D",
        "-PT5S",
        "-5",
        "P-1D",
        "P1.5D",
        "P0.5M",
        "PT1.5H30M",
        "P1Y1Y",
        "PT1M1H",
        "P101Y",
        "P36526D",
        "PT876601H",
        "PT1E5S",
        "garbage",
        "P" + "9" * 80 + "D",
        True,
        False,
        math.nan,
        math.inf,
        -math.inf,
        -1,
        -0.5,
        10**12,
        1e300,
        timedelta(seconds=-1),
        timedelta(days=36526),
        None,
        [90],
    ],
)
def test_parse_rejects(value: object) -> None:
    with pytest.raises(InvalidInput) as info:
        parse_duration(value, field="retry_after")  # type: ignore[arg-type]
    assert info.value.field == "retry_after"
    assert info.value.code == "invalid_input"


def test_parse_default_field_is_delay() -> None:
    with pytest.raises(InvalidInput) as info:
        parse_duration("soon")
    assert info.value.field == "delay"


def test_calendar_duration_refuses_negative_parts() -> None:
    with pytest.raises(ValueError, match="negative"):
        CalendarDuration(days=-1)


def test_p15d_across_new_york_spring_forward_keeps_wall_clock() -> None:
    # 2025-03-01 14:00Z is 09:00 EST. 15 calendar days later is 2025-03-16 09:00, now EDT (-04):
    # 13:00Z. That is 15 x 24 h - 1 h of real time, because the clocks skipped an hour on 03-09.
    start = z(2025, 3, 1, 14)
    due = add_duration(start, parse_duration("P15D"), NEW_YORK)
    assert due == z(2025, 3, 16, 13)
    assert due - start == timedelta(days=15) - timedelta(hours=1)
    assert due.tzinfo is UTC


def test_p15d_without_zone_counts_utc_days() -> None:
    # On the UTC calendar a day is always 24 h: 14:00Z on 03-16.
    assert add_duration(z(2025, 3, 1, 14), parse_duration("P15D"), None) == z(2025, 3, 16, 14)


def test_exact_hours_ignore_the_zone() -> None:
    # PT360H is real time even with a zone: 14:00Z on 03-16, which shows 10:00 EDT.
    due = add_duration(z(2025, 3, 1, 14), parse_duration("PT360H"), NEW_YORK)
    assert due == z(2025, 3, 16, 14)


@pytest.mark.parametrize(
    ("start", "text", "zone", "expected"),
    [
        # 2025-01-31 09:00 EST (14:00Z) + 1 month: Feb has 28 days -> 2025-02-28 09:00 EST = 14:00Z.
        (z(2025, 1, 31, 14), "P1M", "America/New_York", z(2025, 2, 28, 14)),
        # 2024 is a leap year: 2024-01-31 09:00 EST + 1 month -> 2024-02-29 09:00 EST = 14:00Z.
        (z(2024, 1, 31, 14), "P1M", "America/New_York", z(2024, 2, 29, 14)),
        # 2025-03-31 09:00 EDT (13:00Z) + 1 month -> 2025-04-30 09:00 EDT = 13:00Z.
        (z(2025, 3, 31, 13), "P1M", "America/New_York", z(2025, 4, 30, 13)),
        # 2025-01-31 09:00 EST + 2 months -> 2025-03-31 09:00 EDT = 13:00Z (clamp only if needed).
        (z(2025, 1, 31, 14), "P2M", "America/New_York", z(2025, 3, 31, 13)),
        # Leap day + 1 year on the UTC calendar clamps to 2025-02-28.
        (z(2024, 2, 29, 12), "P1Y", None, z(2025, 2, 28, 12)),
        # 13 months from 2025-12-15 carries into 2027-01-15.
        (z(2025, 12, 15, 6), "P13M", None, z(2027, 1, 15, 6)),
        # Sydney: 2025-03-15 09:00 AEDT (+11) = 03-14 22:00Z; + 1 month -> 2025-04-15 09:00 AEST
        # (+10) = 04-14 23:00Z.
        (z(2025, 3, 14, 22), "P1M", "Australia/Sydney", z(2025, 4, 14, 23)),
        # Lord Howe: 2025-10-04 12:00 (+10:30) = 01:30Z; + 1 day -> 10-05 12:00 (+11) = 01:00Z,
        # 23.5 h later.
        (z(2025, 10, 4, 1, 30), "P1D", "Australia/Lord_Howe", z(2025, 10, 5, 1)),
        # P1DT1H: 2025-03-08 09:00 EST (14:00Z) + 1 day = 03-09 09:00 EDT (13:00Z), then one real
        # hour -> 14:00Z.
        (z(2025, 3, 8, 14), "P1DT1H", "America/New_York", z(2025, 3, 9, 14)),
        # Apia: 2011-12-29 12:00 (-10) = 22:00Z. + 1 day lands on the missing 12-30 12:00, read
        # with -10 -> 12-30 22:00Z (= 12-31 12:00 +14). + 2 days is 12-31 12:00 (+14) -> the
        # very same instant.
        (z(2011, 12, 29, 22), "P1D", "Pacific/Apia", z(2011, 12, 30, 22)),
        (z(2011, 12, 29, 22), "P2D", "Pacific/Apia", z(2011, 12, 30, 22)),
        # Kathmandu has no DST: P1D = 24 h. 2025-03-15 03:15Z (09:00) -> 03-16 03:15Z.
        (z(2025, 3, 15, 3, 15), "P1D", "Asia/Kathmandu", z(2025, 3, 16, 3, 15)),
    ],
)
def test_calendar_vectors(start: datetime, text: str, zone: str | None, expected: datetime) -> None:
    tz = load_zone(zone) if zone else None
    assert add_duration(start, parse_duration(text), tz) == expected


def test_calendar_day_landing_in_a_gap_follows_disambiguation() -> None:
    # 2025-03-08 02:30 EST = 07:30Z. One day later, 2025-03-09 02:30, does not exist.
    start = z(2025, 3, 8, 7, 30)
    one_day = parse_duration("P1D")
    # compatible: read with EST (-05) -> 07:30Z (shows 03:30 EDT); exactly 24 h later.
    assert add_duration(start, one_day, NEW_YORK) == z(2025, 3, 9, 7, 30)
    # earlier: read with EDT (-04) -> 06:30Z (shows 01:30 EST).
    assert add_duration(start, one_day, NEW_YORK, "earlier") == z(2025, 3, 9, 6, 30)
    with pytest.raises(NonexistentLocalTime) as info:
        add_duration(start, one_day, NEW_YORK, "reject")
    assert info.value.field == "delay"


def test_calendar_day_landing_in_an_overlap() -> None:
    # 2025-11-01 01:30 EDT = 05:30Z. Next day 01:30 happens twice: 05:30Z (EDT), 06:30Z (EST).
    start = z(2025, 11, 1, 5, 30)
    one_day = parse_duration("P1D")
    assert add_duration(start, one_day, NEW_YORK) == z(2025, 11, 2, 5, 30)
    assert add_duration(start, one_day, NEW_YORK, "later") == z(2025, 11, 2, 6, 30)
    # Starting from the second 01:30 (06:30Z, EST): next day 01:30 EST = 06:30Z on 11-03.
    assert add_duration(z(2025, 11, 2, 6, 30), one_day, NEW_YORK) == z(2025, 11, 3, 6, 30)


def test_exact_durations_add_real_time_whatever_the_start_zone() -> None:
    tokyo = load_zone("Asia/Tokyo")
    start = datetime(2025, 3, 15, 9, tzinfo=tokyo)  # = 00:00Z
    due = add_duration(start, parse_duration("PT90S"), NEW_YORK)
    assert due == z(2025, 3, 15, 0, 1) + timedelta(seconds=30)
    assert due.tzinfo is UTC


def test_add_duration_needs_an_aware_start() -> None:
    with pytest.raises(ValueError, match="aware"):
        add_duration(datetime(2025, 1, 1), parse_duration("PT1S"), None)


def test_add_duration_out_of_range_names_the_field() -> None:
    with pytest.raises(InvalidInput) as info:
        add_duration(z(9950, 1, 1), parse_duration("P100Y"), None, field="every")
    assert info.value.field == "every"
    with pytest.raises(InvalidInput) as info2:
        add_duration(z(9990, 1, 1), parse_duration("PT876000H"), NEW_YORK)
    assert info2.value.field == "delay"


def test_add_months_clamps() -> None:
    assert add_months(datetime(2025, 1, 31, 9), 1) == datetime(2025, 2, 28, 9)
    assert add_months(datetime(2025, 5, 31), 1) == datetime(2025, 6, 30)
    assert add_months(datetime(2025, 12, 31), 2) == datetime(2026, 2, 28)
    assert add_months(datetime(2025, 8, 15), 0) == datetime(2025, 8, 15)
