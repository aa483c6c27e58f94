"""The four one-shot forms of "when", hand-checked, and every way to get them wrong."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime, timedelta

import pytest

from duetime.errors import (
    AmbiguousLocalTime,
    InvalidInput,
    NonexistentLocalTime,
    UnknownTimezone,
)
from duetime.timemath.tzmath import load_zone
from duetime.timemath.when import When, reresolve, resolve_when


def z(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


NOW = z(2025, 3, 1, 14)  # 09:00 EST in New York


# --- at ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2025-03-15T13:00:00Z", z(2025, 3, 15, 13)),
        ("2025-03-15T13:00:00+00:00", z(2025, 3, 15, 13)),
        # 09:00 at -04:00 (EDT) is 13:00Z.
        ("2025-03-15T09:00:00-04:00", z(2025, 3, 15, 13)),
        # 09:00 at +05:45 (Kathmandu) is 03:15Z.
        ("2025-03-15T09:00:00+05:45", z(2025, 3, 15, 3, 15)),
        # 00:30 at +09:00 (Tokyo) is 15:30Z the day before.
        ("2025-03-15T00:30+09:00", z(2025, 3, 14, 15, 30)),
        ("  2025-03-15T13:00:00.250Z  ", z(2025, 3, 15, 13) + timedelta(milliseconds=250)),
        # An aware datetime in New York: 09:00 EDT = 13:00Z.
        (datetime(2025, 3, 15, 9, tzinfo=load_zone("America/New_York")), z(2025, 3, 15, 13)),
    ],
)
def test_at(value: str | datetime, expected: datetime) -> None:
    when = resolve_when(now=NOW, at=value)
    assert when == When(expected, None, None, "compatible")
    assert when.due_at.tzinfo is UTC


def test_at_ignores_timezone_but_still_validates_it() -> None:
    when = resolve_when(now=NOW, at="2025-03-15T13:00:00Z", timezone="Asia/Tokyo")
    assert when.due_at == z(2025, 3, 15, 13)
    assert when.timezone is None
    with pytest.raises(UnknownTimezone) as info:
        resolve_when(now=NOW, at="2025-03-15T13:00:00Z", timezone="Mars/Olympus")
    assert info.value.field == "timezone"


@pytest.mark.parametrize("value", ["2025-03-15T13:00:00", datetime(2025, 3, 15, 13)])
def test_at_naive_is_an_error(value: str | datetime) -> None:
    with pytest.raises(
        InvalidInput, match="has no UTC offset; add one or use local= with timezone="
    ) as info:
        resolve_when(now=NOW, at=value)
    assert info.value.field == "at"


@pytest.mark.parametrize(
    "value",
    [
        "",
        "tomorrow",
        "2025-02-29T09:00:00Z",
        "2025-13-01T09:00:00Z",
        "2025-03-15T25:00:00Z",
        "2025-03-15",  # a date alone is naive
        "1969-12-31T23:59:59Z",
        "9000-01-01T00:00:00Z",
        "1970-01-01T00:30:00+01:00",  # = 1969-12-31 23:30Z
        "8999-12-31T23:00:00-02:00",  # = 9000-01-01 01:00Z
        "0001-01-01T00:00:00+14:00",
        "2025-03-15T13:00:00.000000" + "0" * 100 + "Z",
        date(2025, 3, 15),
        1742043600,
    ],
)
def test_at_rejects(value: object) -> None:
    with pytest.raises(InvalidInput) as info:
        resolve_when(now=NOW, at=value)  # type: ignore[arg-type]
    assert info.value.field == "at"


# --- delay ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("delay", "expected"),
    [
        ("PT90S", NOW + timedelta(seconds=90)),
        (90, NOW + timedelta(seconds=90)),
        (0, NOW),
        (timedelta(days=15), NOW + timedelta(days=15)),
        # No zone: calendar days on the UTC calendar, 15 x 24 h.
        ("P15D", z(2025, 3, 16, 14)),
    ],
)
def test_delay(delay: str | int | timedelta, expected: datetime) -> None:
    when = resolve_when(now=NOW, delay=delay)
    assert when == When(expected, None, None, "compatible")


def test_delay_calendar_days_in_a_zone_keep_wall_clock() -> None:
    # NOW is 09:00 EST on 03-01; 15 days on is 09:00 EDT on 03-16 = 13:00Z (an hour less real time).
    when = resolve_when(now=NOW, delay="P15D", timezone="America/New_York")
    assert when.due_at == z(2025, 3, 16, 13)
    assert when.local is None
    assert when.timezone == "America/New_York"
    # A timedelta is exact even with a zone: 15 x 24 h -> 14:00Z.
    exact = resolve_when(now=NOW, delay=timedelta(days=15), timezone="America/New_York")
    assert exact.due_at == z(2025, 3, 16, 14)


def test_delay_from_an_aware_non_utc_now() -> None:
    tokyo_now = datetime(2025, 3, 15, 9, tzinfo=load_zone("Asia/Tokyo"))  # 00:00Z
    assert resolve_when(now=tokyo_now, delay="PT1H").due_at == z(2025, 3, 15, 1)


@pytest.mark.parametrize("delay", ["-PT1S", "", "soon", -5, True, float("nan"), "P101Y"])
def test_delay_rejects(delay: object) -> None:
    with pytest.raises(InvalidInput) as info:
        resolve_when(now=NOW, delay=delay)  # type: ignore[arg-type]
    assert info.value.field == "delay"


def test_delay_past_the_last_year_is_rejected() -> None:
    with pytest.raises(InvalidInput) as info:
        resolve_when(now=z(8999, 6, 1), delay="P1Y")
    assert info.value.field == "delay"


def test_delay_landing_in_a_gap_with_reject() -> None:
    # 2025-03-08 02:30 EST (07:30Z) + P1D = the missing 2025-03-09 02:30.
    with pytest.raises(NonexistentLocalTime) as info:
        resolve_when(
            now=z(2025, 3, 8, 7, 30),
            delay="P1D",
            timezone="America/New_York",
            disambiguation="reject",
        )
    assert info.value.field == "delay"


# --- local ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("local", "timezone", "disambiguation", "expected"),
    [
        # A common mistake: 09:00 New York on 2025-03-15 is EDT, 13:00Z (not 14:00Z).
        ("2025-03-15T09:00", "America/New_York", "compatible", z(2025, 3, 15, 13)),
        ("2025-03-15 09:00:00", "America/New_York", "compatible", z(2025, 3, 15, 13)),
        # Gap: 02:30 on 2025-03-09 -> EST reading 07:30Z; earlier -> EDT reading 06:30Z.
        ("2025-03-09T02:30", "America/New_York", "compatible", z(2025, 3, 9, 7, 30)),
        ("2025-03-09T02:30", "America/New_York", "later", z(2025, 3, 9, 7, 30)),
        ("2025-03-09T02:30", "America/New_York", "earlier", z(2025, 3, 9, 6, 30)),
        # Overlap: 01:30 on 2025-11-02 -> EDT 05:30Z first, EST 06:30Z later.
        ("2025-11-02T01:30", "America/New_York", "compatible", z(2025, 11, 2, 5, 30)),
        ("2025-11-02T01:30", "America/New_York", "later", z(2025, 11, 2, 6, 30)),
        # Kathmandu +05:45: 09:00 -> 03:15Z. Kolkata +05:30: 09:00 -> 03:30Z.
        ("2025-03-15T09:00", "Asia/Kathmandu", "compatible", z(2025, 3, 15, 3, 15)),
        ("2025-03-15T09:00", "Asia/Kolkata", "compatible", z(2025, 3, 15, 3, 30)),
        # Tokyo +09: 09:00 -> 00:00Z.
        ("2025-03-15T09:00", "Asia/Tokyo", "compatible", z(2025, 3, 15, 0)),
        # London in BST after 2025-03-30: 09:00 -> 08:00Z.
        ("2025-04-01T09:00", "Europe/London", "compatible", z(2025, 4, 1, 8)),
        # Berlin overlap 02:30 on 2025-10-26: CEST 00:30Z, CET 01:30Z.
        ("2025-10-26T02:30", "Europe/Berlin", "later", z(2025, 10, 26, 1, 30)),
        # Sydney gap 02:30 on 2025-10-05: AEST reading 16:30Z on 10-04.
        ("2025-10-05T02:30", "Australia/Sydney", "compatible", z(2025, 10, 4, 16, 30)),
        # Lord Howe gap 02:15 on 2025-10-05: +10:30 reading 15:45Z on 10-04.
        ("2025-10-05T02:15", "Australia/Lord_Howe", "compatible", z(2025, 10, 4, 15, 45)),
        # Sao Paulo, no DST any more: -03, 12:00 -> 15:00Z.
        ("2025-01-15T12:00", "America/Sao_Paulo", "compatible", z(2025, 1, 15, 15)),
        # Apia's missing day: noon read with -10 -> 22:00Z on 12-30.
        ("2011-12-30T12:00", "Pacific/Apia", "compatible", z(2011, 12, 30, 22)),
        # Seconds and a fraction are kept.
        (
            "2025-03-15T09:00:30.5",
            "UTC",
            "compatible",
            z(2025, 3, 15, 9, 0, 30) + timedelta(milliseconds=500),
        ),
    ],
)
def test_local(local: str, timezone: str, disambiguation: str, expected: datetime) -> None:
    when = resolve_when(now=NOW, local=local, timezone=timezone, disambiguation=disambiguation)
    assert when.due_at == expected
    assert when.due_at.tzinfo is UTC
    assert when.timezone == timezone
    assert when.disambiguation == disambiguation
    assert when.local is not None
    assert when.local.tzinfo is None


def test_local_keeps_the_wall_time_for_reresolution() -> None:
    when = resolve_when(now=NOW, local="2025-03-15T09:00", timezone="America/New_York")
    assert when == When(
        z(2025, 3, 15, 13), datetime(2025, 3, 15, 9), "America/New_York", "compatible"
    )


def test_local_accepts_a_naive_datetime() -> None:
    when = resolve_when(now=NOW, local=datetime(2025, 3, 15, 9), timezone="Asia/Tokyo")
    assert when.due_at == z(2025, 3, 15, 0)


def test_local_reject_in_gap_and_overlap() -> None:
    with pytest.raises(NonexistentLocalTime) as gap:
        resolve_when(
            now=NOW, local="2025-03-09T02:30", timezone="America/New_York", disambiguation="reject"
        )
    assert gap.value.field == "local"
    with pytest.raises(AmbiguousLocalTime) as overlap:
        resolve_when(
            now=NOW, local="2025-11-02T01:30", timezone="America/New_York", disambiguation="reject"
        )
    assert overlap.value.field == "local"


def test_local_needs_a_timezone() -> None:
    with pytest.raises(InvalidInput) as info:
        resolve_when(now=NOW, local="2025-03-15T09:00")
    assert info.value.field == "timezone"


@pytest.mark.parametrize("timezone", ["Mars/Olympus", "", "../etc/passwd", "EST5EDT "])
def test_local_unknown_timezone(timezone: str) -> None:
    with pytest.raises(UnknownTimezone) as info:
        resolve_when(now=NOW, local="2025-03-15T09:00", timezone=timezone)
    assert info.value.field == "timezone"


def test_unknown_timezone_message() -> None:
    with pytest.raises(UnknownTimezone, match="unknown IANA timezone 'Mars/Olympus'"):
        resolve_when(now=NOW, local="2025-03-15T09:00", timezone="Mars/Olympus")


@pytest.mark.parametrize(
    "local",
    [
        "2025-03-15T09:00Z",
        "2025-03-15T09:00:00+09:00",
        "2025-03-15T09:00-05",
        "2025-02-29T09:00",
        "2025-13-01T09:00",
        "2025-04-31T09:00",
        "2025-03-15T24:00",
        "2025-03-15T09:60",
        "2025-03-15T09:00:60",
        "2025-03-15T9:00",
        "2025-03-15",
        "2025-03-15T09:00:00.1234567",
        "1969-12-31T23:00",
        "9000-01-01T00:00",
        "nine o'clock",
        "",
        datetime(2025, 3, 15, 9, tzinfo=UTC),
        datetime(1969, 1, 1),
        date(2025, 3, 15),
        12,
    ],
)
def test_local_rejects(local: object) -> None:
    with pytest.raises(InvalidInput) as info:
        resolve_when(now=NOW, local=local, timezone="Europe/Berlin")  # type: ignore[arg-type]
    assert info.value.field == "local"


def test_local_with_offset_message() -> None:
    with pytest.raises(InvalidInput, match="has a UTC offset"):
        resolve_when(now=NOW, local="2025-03-15T09:00+01:00", timezone="Europe/Berlin")


def test_local_before_the_epoch_in_utc_is_rejected() -> None:
    # 1970-01-01 00:00 in Tokyo is 1969-12-31 15:00Z: outside the supported instants.
    with pytest.raises(InvalidInput) as info:
        resolve_when(now=NOW, local="1970-01-01T00:00", timezone="Asia/Tokyo")
    assert info.value.field == "local"


# --- date -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "timezone", "expected"),
    [
        # Default zone UTC: midnight 00:00Z.
        ("2025-03-15", None, z(2025, 3, 15)),
        (date(2025, 3, 15), None, z(2025, 3, 15)),
        # Tokyo midnight (+09) is 15:00Z the day before.
        ("2025-03-15", "Asia/Tokyo", z(2025, 3, 14, 15)),
        # New York midnight on 03-15 (EDT, -04) is 04:00Z.
        ("2025-03-15", "America/New_York", z(2025, 3, 15, 4)),
        # Kathmandu midnight (+05:45) is 18:15Z the day before.
        ("2025-03-15", "Asia/Kathmandu", z(2025, 3, 14, 18, 15)),
        # Sao Paulo's DST used to start at midnight: 2018-11-04 00:00 never happened. Read with
        # the offset before the gap (-03): 03:00Z, which showed 01:00 -02.
        ("2018-11-04", "America/Sao_Paulo", z(2018, 11, 4, 3)),
        # Apia's missing 2011-12-30: 00:00 read with -10 -> 10:00Z, which showed 12-31 00:00 +14.
        ("2011-12-30", "Pacific/Apia", z(2011, 12, 30, 10)),
        ("2024-02-29", None, z(2024, 2, 29)),
    ],
)
def test_date(value: str | date, timezone: str | None, expected: datetime) -> None:
    when = resolve_when(now=NOW, date=value, timezone=timezone)
    assert when.due_at == expected
    assert when.local is not None
    assert when.local.hour == 0
    assert when.local.minute == 0
    assert when.timezone == (timezone or "UTC")


def test_date_midnight_gap_with_reject() -> None:
    with pytest.raises(NonexistentLocalTime) as info:
        resolve_when(
            now=NOW, date="2018-11-04", timezone="America/Sao_Paulo", disambiguation="reject"
        )
    assert info.value.field == "date"


@pytest.mark.parametrize(
    "value",
    [
        "2025-02-29",
        "2025-13-01",
        "2025-00-10",
        "2025-04-31",
        "2025-3-15",
        "15/03/2025",
        "2025-03-15T00:00",
        "1969-12-31",
        "9000-01-01",
        "",
        datetime(2025, 3, 15),
        date(1969, 7, 20),
        20250315,
    ],
)
def test_date_rejects(value: object) -> None:
    with pytest.raises(InvalidInput) as info:
        resolve_when(now=NOW, date=value)  # type: ignore[arg-type]
    assert info.value.field == "date"


def test_date_unknown_timezone() -> None:
    with pytest.raises(UnknownTimezone) as info:
        resolve_when(now=NOW, date="2025-03-15", timezone="Mars/Olympus")
    assert info.value.field == "timezone"


# --- choosing a form --------------------------------------------------------------------------


def test_no_form_given() -> None:
    with pytest.raises(InvalidInput, match="one of at, delay, local or date is required") as info:
        resolve_when(now=NOW)
    assert info.value.field == "at"
    with pytest.raises(InvalidInput) as info2:
        resolve_when(now=NOW, timezone="Asia/Tokyo")
    assert info2.value.field == "at"


@pytest.mark.parametrize(
    ("forms", "field"),
    [
        ({"at": "2025-03-15T13:00:00Z", "delay": "PT1S"}, "delay"),
        ({"at": "2025-03-15T13:00:00Z", "local": "2025-03-15T09:00"}, "local"),
        ({"delay": 5, "date": "2025-03-15"}, "date"),
        ({"local": "2025-03-15T09:00", "date": "2025-03-15"}, "date"),
        ({"at": "2025-03-15T13:00:00Z", "delay": 0, "local": "2025-03-15T09:00"}, "delay"),
        # An empty string is still "given": it must not fall through to another form.
        ({"at": "", "delay": "PT1S"}, "delay"),
    ],
)
def test_forms_are_exclusive(forms: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInput, match="exclusive") as info:
        resolve_when(now=NOW, timezone="UTC", **forms)  # type: ignore[arg-type]
    assert info.value.field == field


@pytest.mark.parametrize("disambiguation", ["", "first", "LATER", "raise", None])
def test_bad_disambiguation(disambiguation: object) -> None:
    with pytest.raises(InvalidInput) as info:
        resolve_when(
            now=NOW,
            local="2025-03-15T09:00",
            timezone="Asia/Tokyo",
            disambiguation=disambiguation,  # type: ignore[arg-type]
        )
    assert info.value.field == "disambiguation"


def test_naive_now_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="aware"):
        resolve_when(now=datetime(2025, 1, 1), delay="PT1S")


# --- reresolve --------------------------------------------------------------------------------


def test_reresolve_after_a_zone_drops_dst() -> None:
    # Under the pre-2019 Brazilian rules, 2025-01-15 12:00 Sao Paulo would have been summer
    # time (-02) = 14:00Z. Stored like that, the current rules (-03 all year) move it to 15:00Z
    # so the user still gets 12:00 on the wall clock.
    stale = When(z(2025, 1, 15, 14), datetime(2025, 1, 15, 12), "America/Sao_Paulo", "compatible")
    fresh = reresolve(stale)
    assert fresh == replace(stale, due_at=z(2025, 1, 15, 15))
    assert fresh.due_at.tzinfo is UTC


def test_reresolve_is_identity_when_nothing_changed() -> None:
    when = resolve_when(now=NOW, local="2025-03-15T09:00", timezone="America/New_York")
    assert reresolve(when) is when
    dated = resolve_when(now=NOW, date="2025-03-15", timezone="Asia/Tokyo")
    assert reresolve(dated) is dated


def test_reresolve_leaves_instant_and_delay_forms_alone() -> None:
    at = resolve_when(now=NOW, at="2025-03-15T13:00:00Z")
    assert reresolve(at) is at
    delayed = resolve_when(now=NOW, delay="P15D", timezone="America/New_York")
    assert reresolve(delayed) is delayed


def test_reresolve_into_a_new_gap_with_reject_raises() -> None:
    stale = When(z(2025, 3, 9, 7, 30), datetime(2025, 3, 9, 2, 30), "America/New_York", "reject")
    with pytest.raises(NonexistentLocalTime) as info:
        reresolve(stale)
    assert info.value.field == "local"
