"""Hand-checked wall-clock <-> UTC vectors: every expected instant is reasoned out in a comment."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from duetime.errors import AmbiguousLocalTime, InvalidInput, NonexistentLocalTime, UnknownTimezone
from duetime.timemath.tzmath import (
    Disambiguation,
    classify,
    gap_or_overlap_size,
    is_aware,
    load_zone,
    parse_disambiguation,
    stored_zone,
    to_local,
    to_utc,
    tzdata_version,
)


def z(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    """A UTC instant, written the way the comments say it."""
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


# (zone, wall time, expected kind, {disambiguation: expected UTC instant})
VECTORS: list[tuple[str, datetime, str, dict[Disambiguation, datetime]]] = [
    # --- America/New_York: EST -05:00, EDT -04:00. DST 2025-03-09 02:00 -> 03:00,
    # ends 2025-11-02 02:00 EDT -> 01:00 EST.
    # 09:00 on 2025-03-15 is after the change: EDT, 09:00 + 4h = 13:00Z (not 14:00, a common slip).
    ("America/New_York", datetime(2025, 3, 15, 9, 0), "normal", {"compatible": z(2025, 3, 15, 13)}),
    # January: EST, 09:00 + 5h = 14:00Z.
    ("America/New_York", datetime(2025, 1, 15, 9, 0), "normal", {"compatible": z(2025, 1, 15, 14)}),
    # 02:30 on 2025-03-09 is skipped. Offset before the gap (-05) gives 07:30Z (= 03:30 EDT);
    # the offset after (-04) gives 06:30Z (= 01:30 EST).
    (
        "America/New_York",
        datetime(2025, 3, 9, 2, 30),
        "gap",
        {
            "compatible": z(2025, 3, 9, 7, 30),
            "later": z(2025, 3, 9, 7, 30),
            "earlier": z(2025, 3, 9, 6, 30),
        },
    ),
    # 02:00 itself is the first skipped minute: -05 reading gives 07:00Z = 03:00 EDT.
    ("America/New_York", datetime(2025, 3, 9, 2, 0), "gap", {"compatible": z(2025, 3, 9, 7)}),
    # 01:59 still EST (-05): 06:59Z; 03:00 already EDT (-04): 07:00Z.
    (
        "America/New_York",
        datetime(2025, 3, 9, 1, 59),
        "normal",
        {"compatible": z(2025, 3, 9, 6, 59)},
    ),
    ("America/New_York", datetime(2025, 3, 9, 3, 0), "normal", {"compatible": z(2025, 3, 9, 7)}),
    # 01:30 on 2025-11-02 happens twice: first in EDT (-04) = 05:30Z, then in EST (-05) = 06:30Z.
    (
        "America/New_York",
        datetime(2025, 11, 2, 1, 30),
        "overlap",
        {
            "compatible": z(2025, 11, 2, 5, 30),
            "earlier": z(2025, 11, 2, 5, 30),
            "later": z(2025, 11, 2, 6, 30),
        },
    ),
    # 02:00 after fall-back exists once (EST): 07:00Z. 00:59 exists once (EDT): 04:59Z.
    ("America/New_York", datetime(2025, 11, 2, 2, 0), "normal", {"later": z(2025, 11, 2, 7)}),
    (
        "America/New_York",
        datetime(2025, 11, 2, 0, 59),
        "normal",
        {"earlier": z(2025, 11, 2, 4, 59)},
    ),
    # --- Europe/London: GMT +00:00, BST +01:00. 2025-03-30 01:00 GMT -> 02:00 BST;
    # 2025-10-26 02:00 BST -> 01:00 GMT.
    # 01:30 on 03-30 skipped: GMT reading 01:30Z; BST reading 00:30Z.
    (
        "Europe/London",
        datetime(2025, 3, 30, 1, 30),
        "gap",
        {"compatible": z(2025, 3, 30, 1, 30), "earlier": z(2025, 3, 30, 0, 30)},
    ),
    # 01:30 on 10-26 twice: BST 00:30Z, then GMT 01:30Z.
    (
        "Europe/London",
        datetime(2025, 10, 26, 1, 30),
        "overlap",
        {"compatible": z(2025, 10, 26, 0, 30), "later": z(2025, 10, 26, 1, 30)},
    ),
    # July: BST, 09:00 - 1h = 08:00Z.
    ("Europe/London", datetime(2025, 7, 1, 9, 0), "normal", {"compatible": z(2025, 7, 1, 8)}),
    # --- Australia/Sydney (southern hemisphere): AEST +10, AEDT +11.
    # DST starts 2025-10-05 02:00 -> 03:00; ends 2025-04-06 03:00 AEDT -> 02:00 AEST.
    # 02:30 on 10-05 skipped: +10 reading = 16:30Z on 10-04; +11 reading = 15:30Z on 10-04.
    (
        "Australia/Sydney",
        datetime(2025, 10, 5, 2, 30),
        "gap",
        {"compatible": z(2025, 10, 4, 16, 30), "earlier": z(2025, 10, 4, 15, 30)},
    ),
    # 02:30 on 04-06 twice: AEDT (+11) 15:30Z on 04-05, then AEST (+10) 16:30Z on 04-05.
    (
        "Australia/Sydney",
        datetime(2025, 4, 6, 2, 30),
        "overlap",
        {"earlier": z(2025, 4, 5, 15, 30), "later": z(2025, 4, 5, 16, 30)},
    ),
    # January is summer: AEDT +11, 09:00 -> 22:00Z the day before. July: AEST +10 -> 23:00Z.
    ("Australia/Sydney", datetime(2025, 1, 15, 9), "normal", {"compatible": z(2025, 1, 14, 22)}),
    ("Australia/Sydney", datetime(2025, 7, 15, 9), "normal", {"compatible": z(2025, 7, 14, 23)}),
    # --- Australia/Lord_Howe: +10:30 standard, +11:00 summer: a 30-minute shift.
    # 2025-10-05 02:00 -> 02:30 (gap 02:00-02:30); 2025-04-06 02:00 -> 01:30 (overlap 01:30-02:00).
    # 02:15 on 10-05: +10:30 reading 15:45Z on 10-04; +11:00 reading 15:15Z on 10-04.
    (
        "Australia/Lord_Howe",
        datetime(2025, 10, 5, 2, 15),
        "gap",
        {
            "compatible": z(2025, 10, 4, 15, 45),
            "later": z(2025, 10, 4, 15, 45),
            "earlier": z(2025, 10, 4, 15, 15),
        },
    ),
    # 02:30 on 10-05 is the first summer minute (+11): 15:30Z. 01:59 is standard (+10:30): 15:29Z.
    (
        "Australia/Lord_Howe",
        datetime(2025, 10, 5, 2, 30),
        "normal",
        {"compatible": z(2025, 10, 4, 15, 30)},
    ),
    (
        "Australia/Lord_Howe",
        datetime(2025, 10, 5, 1, 59),
        "normal",
        {"compatible": z(2025, 10, 4, 15, 29)},
    ),
    # 01:45 on 04-06 twice: +11 reading 14:45Z on 04-05, +10:30 reading 15:15Z on 04-05.
    (
        "Australia/Lord_Howe",
        datetime(2025, 4, 6, 1, 45),
        "overlap",
        {
            "compatible": z(2025, 4, 5, 14, 45),
            "earlier": z(2025, 4, 5, 14, 45),
            "later": z(2025, 4, 5, 15, 15),
        },
    ),
    # 02:00 on 04-06 exists once (+10:30): 15:30Z. 01:29 exists once (+11): 14:29Z.
    (
        "Australia/Lord_Howe",
        datetime(2025, 4, 6, 2, 0),
        "normal",
        {"compatible": z(2025, 4, 5, 15, 30)},
    ),
    (
        "Australia/Lord_Howe",
        datetime(2025, 4, 6, 1, 29),
        "normal",
        {"compatible": z(2025, 4, 5, 14, 29)},
    ),
    # --- Asia/Kathmandu: +05:45. 09:00 - 5:45 = 03:15Z.
    ("Asia/Kathmandu", datetime(2025, 3, 15, 9), "normal", {"compatible": z(2025, 3, 15, 3, 15)}),
    # Nepal moved from +05:30 to +05:45 at 1986-01-01 00:00 -> 00:15, a 15-minute gap.
    # 00:10: +05:30 reading = 18:40Z on 1985-12-31; +05:45 reading = 18:25Z.
    (
        "Asia/Kathmandu",
        datetime(1986, 1, 1, 0, 10),
        "gap",
        {"compatible": z(1985, 12, 31, 18, 40), "earlier": z(1985, 12, 31, 18, 25)},
    ),
    # --- Asia/Kolkata: +05:30, no DST. 09:00 -> 03:30Z; 23:59 on 12-31 -> 18:29Z.
    ("Asia/Kolkata", datetime(2025, 3, 15, 9), "normal", {"compatible": z(2025, 3, 15, 3, 30)}),
    ("Asia/Kolkata", datetime(2025, 12, 31, 23, 59), "normal", {"later": z(2025, 12, 31, 18, 29)}),
    # --- America/Sao_Paulo: -03:00, DST (-02:00) abolished in 2019.
    # Mid-January 2025 would once have been summer time; now -03: 12:00 -> 15:00Z.
    ("America/Sao_Paulo", datetime(2025, 1, 15, 12), "normal", {"compatible": z(2025, 1, 15, 15)}),
    # The first Sunday of November 2025 has no change any more: 00:30 -> 03:30Z.
    (
        "America/Sao_Paulo",
        datetime(2025, 11, 2, 0, 30),
        "normal",
        {"compatible": z(2025, 11, 2, 3, 30)},
    ),
    # But DST began at midnight on 2018-11-04 (00:00 -> 01:00): 00:30 is skipped.
    # -03 reading = 03:30Z; -02 reading = 02:30Z.
    (
        "America/Sao_Paulo",
        datetime(2018, 11, 4, 0, 30),
        "gap",
        {"compatible": z(2018, 11, 4, 3, 30), "earlier": z(2018, 11, 4, 2, 30)},
    ),
    # The last DST ended 2019-02-17 00:00 -> 2019-02-16 23:00: 23:30 on 02-16 happens twice,
    # -02 reading 01:30Z on 02-17, then -03 reading 02:30Z on 02-17.
    (
        "America/Sao_Paulo",
        datetime(2019, 2, 16, 23, 30),
        "overlap",
        {"earlier": z(2019, 2, 17, 1, 30), "later": z(2019, 2, 17, 2, 30)},
    ),
    # --- Pacific/Apia: jumped from -10 (summer) to +14 at the end of 2011-12-29; 12-30 never
    # happened. Noon that day: -10 reading 22:00Z on 12-30 (= 12-31 12:00 +14); +14 reading
    # 22:00Z on 12-29 (= 12-29 12:00 -10).
    (
        "Pacific/Apia",
        datetime(2011, 12, 30, 12),
        "gap",
        {
            "compatible": z(2011, 12, 30, 22),
            "later": z(2011, 12, 30, 22),
            "earlier": z(2011, 12, 29, 22),
        },
    ),
    # First and last minute of the missing day are missing too: -10 readings 10:00Z and 09:59Z+1d.
    ("Pacific/Apia", datetime(2011, 12, 30, 0, 0), "gap", {"compatible": z(2011, 12, 30, 10)}),
    ("Pacific/Apia", datetime(2011, 12, 30, 23, 59), "gap", {"compatible": z(2011, 12, 31, 9, 59)}),
    # 23:00 on 12-29 existed (-10): 09:00Z on 12-30. 00:00 on 12-31 existed (+14): 10:00Z 12-30.
    ("Pacific/Apia", datetime(2011, 12, 29, 23), "normal", {"compatible": z(2011, 12, 30, 9)}),
    ("Pacific/Apia", datetime(2011, 12, 31, 0), "normal", {"compatible": z(2011, 12, 30, 10)}),
    # Samoa dropped DST in 2021: +13 all year; 09:00 on 2025-03-15 -> 20:00Z on 03-14.
    ("Pacific/Apia", datetime(2025, 3, 15, 9), "normal", {"compatible": z(2025, 3, 14, 20)}),
    # --- Europe/Berlin: CET +01, CEST +02. 2025-03-30 02:00 -> 03:00; 2025-10-26 03:00 -> 02:00.
    # 02:30 on 03-30 skipped: +01 reading 01:30Z, +02 reading 00:30Z.
    (
        "Europe/Berlin",
        datetime(2025, 3, 30, 2, 30),
        "gap",
        {"compatible": z(2025, 3, 30, 1, 30), "earlier": z(2025, 3, 30, 0, 30)},
    ),
    # 02:30 on 10-26 twice: +02 reading 00:30Z, then +01 reading 01:30Z.
    (
        "Europe/Berlin",
        datetime(2025, 10, 26, 2, 30),
        "overlap",
        {"compatible": z(2025, 10, 26, 0, 30), "later": z(2025, 10, 26, 1, 30)},
    ),
    # July: CEST, 12:00 - 2h = 10:00Z.
    ("Europe/Berlin", datetime(2025, 7, 1, 12), "normal", {"compatible": z(2025, 7, 1, 10)}),
    # --- Asia/Tokyo: +09, no DST. 09:00 -> 00:00Z; midnight -> 15:00Z the day before.
    ("Asia/Tokyo", datetime(2025, 3, 15, 9), "normal", {"compatible": z(2025, 3, 15, 0)}),
    ("Asia/Tokyo", datetime(2025, 3, 15, 0), "normal", {"reject": z(2025, 3, 14, 15)}),
]


@pytest.mark.parametrize(
    ("name", "wall", "kind", "expected"),
    VECTORS,
    ids=[f"{v[0]}-{v[1].isoformat()}" for v in VECTORS],
)
def test_hand_checked_vectors(
    name: str, wall: datetime, kind: str, expected: dict[Disambiguation, datetime]
) -> None:
    zone = load_zone(name)
    assert classify(wall, zone) == kind
    for disambiguation, instant in expected.items():
        result = to_utc(wall, zone, disambiguation)
        assert result == instant, disambiguation
        assert result.tzinfo is UTC


@pytest.mark.parametrize(
    ("name", "wall", "size"),
    [
        ("America/New_York", datetime(2025, 3, 9, 2, 30), timedelta(hours=1)),
        ("America/New_York", datetime(2025, 11, 2, 1, 30), timedelta(hours=1)),
        ("Australia/Lord_Howe", datetime(2025, 10, 5, 2, 15), timedelta(minutes=30)),
        ("Australia/Lord_Howe", datetime(2025, 4, 6, 1, 45), timedelta(minutes=30)),
        ("Asia/Kathmandu", datetime(1986, 1, 1, 0, 10), timedelta(minutes=15)),
        ("Pacific/Apia", datetime(2011, 12, 30, 12), timedelta(days=1)),
        ("Asia/Tokyo", datetime(2025, 3, 15, 9), timedelta(0)),
    ],
)
def test_gap_and_overlap_sizes(name: str, wall: datetime, size: timedelta) -> None:
    assert gap_or_overlap_size(wall, load_zone(name)) == size


def test_every_gap_vector_is_rejected_on_request() -> None:
    for name, wall, kind, _ in VECTORS:
        zone = load_zone(name)
        if kind == "gap":
            with pytest.raises(NonexistentLocalTime) as info:
                to_utc(wall, zone, "reject", field="local")
            assert info.value.field == "local"
            assert info.value.code == "nonexistent_local_time"
        elif kind == "overlap":
            with pytest.raises(AmbiguousLocalTime) as info2:
                to_utc(wall, zone, "reject", field="start")
            assert info2.value.field == "start"
            assert info2.value.code == "ambiguous_local_time"
        else:
            assert to_utc(wall, zone, "reject") == to_utc(wall, zone)


def test_reject_message_says_what_happened() -> None:
    zone = load_zone("Australia/Lord_Howe")
    with pytest.raises(NonexistentLocalTime, match="30 minutes"):
        to_utc(datetime(2025, 10, 5, 2, 15), zone, "reject")
    with pytest.raises(NonexistentLocalTime, match="1 day"):
        to_utc(datetime(2011, 12, 30, 12), load_zone("Pacific/Apia"), "reject")
    with pytest.raises(AmbiguousLocalTime, match="happens twice in America/New_York"):
        to_utc(datetime(2025, 11, 2, 1, 30), load_zone("America/New_York"), "reject")


def test_fold_on_the_input_is_ignored_disambiguation_decides() -> None:
    # Python's fold=1 would pick 06:30Z; the caller's disambiguation must win.
    zone = load_zone("America/New_York")
    assert to_utc(datetime(2025, 11, 2, 1, 30, fold=1), zone) == z(2025, 11, 2, 5, 30)


def test_to_local() -> None:
    zone = load_zone("America/New_York")
    # 05:30Z and 06:30Z on 2025-11-02 both show 01:30; the result is naive with fold cleared.
    first = to_local(z(2025, 11, 2, 5, 30), zone)
    second = to_local(z(2025, 11, 2, 6, 30), zone)
    assert first == second == datetime(2025, 11, 2, 1, 30)
    assert second.fold == 0
    assert second.tzinfo is None
    # 07:00Z on 2025-03-09 is the first EDT instant: 03:00 local.
    assert to_local(z(2025, 3, 9, 7), zone) == datetime(2025, 3, 9, 3)
    # Aware input in another zone: 09:00 Tokyo (+09) = 00:00Z on 03-15; New York is on EDT by
    # then (-04), so 20:00 on 03-14.
    tokyo_nine = datetime(2025, 3, 15, 9, tzinfo=load_zone("Asia/Tokyo"))
    assert to_local(tokyo_nine, zone) == datetime(2025, 3, 14, 20)
    with pytest.raises(ValueError, match="aware"):
        to_local(datetime(2025, 1, 1), zone)


def test_is_aware() -> None:
    assert is_aware(z(2025, 1, 1))
    assert is_aware(datetime(2025, 1, 1, tzinfo=load_zone("Asia/Tokyo")))
    assert not is_aware(datetime(2025, 1, 1))


def test_load_zone_uses_tzdata_package_and_caches() -> None:
    import tzdata  # type: ignore[import-untyped, unused-ignore]

    assert tzdata_version() == tzdata.IANA_VERSION
    assert re.fullmatch(r"\d{4}[a-z]", tzdata_version())
    zone = load_zone("America/New_York")
    assert zone.key == "America/New_York"
    assert load_zone("America/New_York") is zone
    # Links and the plain UTC name are valid IANA names.
    assert load_zone("UTC").utcoffset(datetime(2025, 1, 1)) == timedelta(0)
    assert load_zone("US/Eastern").utcoffset(datetime(2025, 1, 1)) == timedelta(hours=-5)


@pytest.mark.parametrize(
    "name",
    [
        "Mars/Olympus",
        "",
        " UTC",
        "UTC ",
        "/etc/passwd",
        "/usr/share/zoneinfo/UTC",
        "../../etc/passwd",
        "America/../Europe/Berlin",
        "America//New_York",
        "America/New_York/",
        "America",
        "zone.tab",
        "tzdata.zi",
        "America/__init__.py",
        "Europe\\Berlin",
        "UTC\x00",
        "x" * 200,
        "america/new_york",
    ],
)
def test_load_zone_rejects(name: str) -> None:
    with pytest.raises(UnknownTimezone) as info:
        load_zone(name, field="schedule.timezone")
    assert info.value.field == "schedule.timezone"
    assert info.value.code == "unknown_timezone"


def test_unknown_zone_message() -> None:
    with pytest.raises(UnknownTimezone, match="unknown IANA timezone 'Mars/Olympus'") as info:
        load_zone("Mars/Olympus")
    assert info.value.field == "timezone"
    with pytest.raises(UnknownTimezone, match="did you mean 'America/New_York'"):
        load_zone("america/new_york")


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("EST", "America/New_York"),
        ("EST5EDT", "America/New_York"),
        ("CST6CDT", "America/Chicago"),
        ("MST", "America/Denver"),
        ("HST", "Pacific/Honolulu"),
        ("PST8PDT", "America/Los_Angeles"),
        ("CET", "Europe/Paris"),
        ("GMT", "UTC"),
        ("Japan", "such as America/New_York"),
        ("Factory", "such as America/New_York"),
    ],
)
def test_legacy_abbreviation_like_zones_are_refused_with_a_hint(name: str, hint: str) -> None:
    with pytest.raises(UnknownTimezone, match="not an IANA Area/City name") as info:
        load_zone(name)
    assert hint in info.value.message
    assert info.value.field == "timezone"


@pytest.mark.parametrize("name", ["UTC", "Etc/UTC", "Etc/GMT+5", "America/New_York", "US/Eastern"])
def test_utc_etc_and_area_names_are_accepted(name: str) -> None:
    assert load_zone(name).key == name


def test_a_stored_legacy_zone_still_loads() -> None:
    # A timer written before legacy names were refused keeps resolving.
    assert stored_zone("EST").utcoffset(datetime(2025, 7, 1)) == timedelta(hours=-5)


def test_load_zone_rejects_non_strings() -> None:
    with pytest.raises(InvalidInput) as info:
        load_zone(5)  # type: ignore[arg-type]
    assert info.value.field == "timezone"


def test_bad_disambiguation() -> None:
    with pytest.raises(InvalidInput) as info:
        to_utc(datetime(2025, 1, 1), load_zone("UTC"), "first")  # type: ignore[arg-type]
    assert info.value.field == "disambiguation"
    with pytest.raises(InvalidInput) as info2:
        parse_disambiguation("LATER", field="on_gap")
    assert info2.value.field == "on_gap"
    assert parse_disambiguation("later") == "later"


def test_aware_wall_is_refused() -> None:
    with pytest.raises(InvalidInput) as info:
        to_utc(z(2025, 1, 1), load_zone("UTC"), field="local")
    assert info.value.field == "local"


def test_out_of_range_wall_is_invalid_input_not_overflow() -> None:
    # 9999-12-31 23:00 in New York is 04:00Z in the year 10000: beyond datetime.
    with pytest.raises(InvalidInput) as info:
        to_utc(datetime(9999, 12, 31, 23), load_zone("America/New_York"), field="local")
    assert info.value.field == "local"
    # 0001-01-01 00:00 in Tokyo is 15:00Z on 0000-12-31: before datetime.
    with pytest.raises(InvalidInput):
        to_utc(datetime(1, 1, 1), load_zone("Asia/Tokyo"))
