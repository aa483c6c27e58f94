"""Hand-checked recurrence vectors: every expected instant is reasoned out in a comment.

Zone facts used below (tzdata):
- America/New_York: EST -05, EDT -04. 2025-03-09 02:00 EST -> 03:00 EDT (at 07:00Z);
  2025-11-02 02:00 EDT -> 01:00 EST (at 06:00Z), so 01:00-02:00 happens twice.
- Europe/London: GMT +00, BST +01. 2025-03-30 01:00 -> 02:00 (at 01:00Z);
  2025-10-26 02:00 BST -> 01:00 GMT (at 01:00Z).
- Australia/Sydney: AEST +10, AEDT +11. 2025-04-06 03:00 AEDT -> 02:00 AEST (at 16:00Z on
  04-05); 2025-10-05 02:00 AEST -> 03:00 AEDT (at 16:00Z on 10-04).
- Australia/Lord_Howe: +10:30, DST +11 (a 30-minute shift). 2025-04-06 02:00 -> 01:30 (at
  15:00Z on 04-05); 2025-10-05 02:00 -> 02:30 (at 15:30Z on 10-04).
- Asia/Kathmandu: +05:45 all year.
- America/Sao_Paulo: -03, DST -02 until 2019. 2018-11-04 00:00 -> 01:00 (at 03:00Z);
  2019-02-17 00:00 -> 2019-02-16 23:00 (at 02:00Z); no DST from 2019 on.
- Pacific/Apia: 2011-12-29 was the last day at -10; at 10:00Z the clock went from
  2011-12-29 24:00 straight to 2011-12-31 00:00 +14 (a 24-hour gap: Dec 30 never happened).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise

import pytest

from duetime.errors import InvalidCron, InvalidInput, UnknownTimezone
from duetime.timemath.recurrence import (
    CRON_ALIASES,
    Recurrence,
    catch_up_due,
    describe,
    iter_occurrences,
    next_after,
    occurrences,
    occurrences_between,
    parse_catch_up,
    parse_recurrence,
)

NOW = datetime(2025, 1, 1, tzinfo=UTC)


def z(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    """A UTC instant, written the way the comments say it."""
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


def cron(
    expr: str, timezone: str = "UTC", on_gap: str = "run_after", on_overlap: str = "once"
) -> Recurrence:
    return parse_recurrence(
        cron=expr, timezone=timezone, on_gap=on_gap, on_overlap=on_overlap, now=NOW
    )


def between(rec: Recurrence, after: datetime, until: datetime) -> list[datetime]:
    return list(occurrences_between(rec, after, until))


# --------------------------------------------------------------------------- New York


def test_new_york_spring_forward_fixed_time_runs_after_the_gap() -> None:
    rec = cron("30 2 * * *", "America/New_York")
    assert occurrences(rec, z(2025, 3, 8), 3) == [
        z(2025, 3, 8, 7, 30),  # 02:30 EST (-05) = 07:30Z
        z(2025, 3, 9, 7, 0),  # 02:30 does not exist: first instant after the gap, 03:00 EDT
        z(2025, 3, 10, 6, 30),  # 02:30 EDT (-04) = 06:30Z
    ]


def test_new_york_spring_forward_skip_has_no_firing_that_day() -> None:
    rec = cron("30 2 * * *", "America/New_York", on_gap="skip")
    assert occurrences(rec, z(2025, 3, 8), 3) == [
        z(2025, 3, 8, 7, 30),
        z(2025, 3, 10, 6, 30),  # nothing on 03-09
        z(2025, 3, 11, 6, 30),
    ]


def test_several_matches_in_a_gap_collapse_into_one_firing() -> None:
    # 02:00, 02:15, 02:30, 02:45 on 03-09 are all skipped: one firing at 03:00 EDT = 07:00Z.
    rec = cron("*/15 2 * * *", "America/New_York")
    assert rec.fixed_time is False  # minute starts with '*': a wildcard job, no collapse
    rec = cron("0,15,30,45 2 * * *", "America/New_York")
    assert rec.fixed_time is True
    assert between(rec, z(2025, 3, 9), z(2025, 3, 10, 6, 0)) == [
        z(2025, 3, 9, 7, 0),
        z(2025, 3, 10, 6, 0),  # 02:00 EDT
    ]


def test_collapsed_firing_on_a_real_match_fires_once() -> None:
    # 02:00 is skipped and runs at 03:00 EDT (07:00Z), which is also a real 03:00 match:
    # one firing at 07:00Z, never two at one instant.
    rec = cron("0 2,3 * * *", "America/New_York")
    assert between(rec, z(2025, 3, 9), z(2025, 3, 10, 7, 0)) == [
        z(2025, 3, 9, 7, 0),
        z(2025, 3, 10, 6, 0),  # 02:00 EDT
        z(2025, 3, 10, 7, 0),  # 03:00 EDT
    ]


def test_new_york_fall_back_fixed_time_once() -> None:
    rec = cron("30 1 * * *", "America/New_York")
    assert occurrences(rec, z(2025, 11, 1, 12), 2) == [
        z(2025, 11, 2, 5, 30),  # the first 01:30, EDT (-04)
        z(2025, 11, 3, 6, 30),  # 01:30 EST (-05)
    ]


def test_new_york_fall_back_fixed_time_both() -> None:
    rec = cron("30 1 * * *", "America/New_York", on_overlap="both")
    assert occurrences(rec, z(2025, 11, 1, 12), 3) == [
        z(2025, 11, 2, 5, 30),  # 01:30 EDT
        z(2025, 11, 2, 6, 30),  # 01:30 EST, one hour later
        z(2025, 11, 3, 6, 30),
    ]


def test_both_from_inside_the_first_pass_still_sees_the_second() -> None:
    # At 05:45Z it is 01:45 EDT; the wall clock will show 01:30 again at 06:30Z (EST).
    rec = cron("30 1 * * *", "America/New_York", on_overlap="both")
    assert next_after(rec, z(2025, 11, 2, 5, 45)) == z(2025, 11, 2, 6, 30)
    # With "once" the next firing is the next day's 01:30 EST.
    once = cron("30 1 * * *", "America/New_York")
    assert next_after(once, z(2025, 11, 2, 5, 45)) == z(2025, 11, 3, 6, 30)


def test_both_interleaves_two_matches_in_the_repeated_hour() -> None:
    # Wall order 01:00, 01:30 gives instants 05:00Z, 06:00Z and 05:30Z, 06:30Z; real order wins.
    rec = cron("0,30 1 * * *", "America/New_York", on_overlap="both")
    assert between(rec, z(2025, 11, 2), z(2025, 11, 2, 12)) == [
        z(2025, 11, 2, 5, 0),
        z(2025, 11, 2, 5, 30),
        z(2025, 11, 2, 6, 0),
        z(2025, 11, 2, 6, 30),
    ]


def test_new_york_wildcard_keeps_real_time_rhythm_across_spring_forward() -> None:
    rec = cron("*/30 * * * *", "America/New_York")
    got = between(rec, z(2025, 3, 9, 5, 45), z(2025, 3, 9, 8, 0))
    # 01:00 and 01:30 EST, then 02:00/02:30 never happen; 03:00 EDT is 07:00Z.
    assert got == [
        z(2025, 3, 9, 6, 0),
        z(2025, 3, 9, 6, 30),
        z(2025, 3, 9, 7, 0),
        z(2025, 3, 9, 7, 30),
        z(2025, 3, 9, 8, 0),
    ]
    assert {b - a for a, b in pairwise(got)} == {timedelta(minutes=30)}


def test_new_york_wildcard_fires_twice_in_the_repeated_hour() -> None:
    rec = cron("*/30 * * * *", "America/New_York")
    got = between(rec, z(2025, 11, 2, 4, 15), z(2025, 11, 2, 7, 30))
    assert got == [
        z(2025, 11, 2, 4, 30),  # 00:30 EDT
        z(2025, 11, 2, 5, 0),  # 01:00 EDT
        z(2025, 11, 2, 5, 30),  # 01:30 EDT
        z(2025, 11, 2, 6, 0),  # 01:00 EST (again)
        z(2025, 11, 2, 6, 30),  # 01:30 EST (again)
        z(2025, 11, 2, 7, 0),  # 02:00 EST
        z(2025, 11, 2, 7, 30),
    ]
    # on_gap/on_overlap do not change a wildcard job.
    skip_once = cron("*/30 * * * *", "America/New_York", on_gap="skip", on_overlap="once")
    assert between(skip_once, z(2025, 11, 2, 4, 15), z(2025, 11, 2, 7, 30)) == got


def test_hourly_alias_is_a_wildcard_job() -> None:
    rec = cron("@hourly", "America/New_York")
    assert rec.fixed_time is False
    # Spring: 01:00 EST = 06:00Z, 02:00 never happens, 03:00 EDT = 07:00Z.
    assert occurrences(rec, z(2025, 3, 9, 5, 30), 3) == [
        z(2025, 3, 9, 6),
        z(2025, 3, 9, 7),
        z(2025, 3, 9, 8),
    ]
    # Fall: 01:00 EDT = 05:00Z, 01:00 EST = 06:00Z, 02:00 EST = 07:00Z.
    assert occurrences(rec, z(2025, 11, 2, 4, 30), 3) == [
        z(2025, 11, 2, 5),
        z(2025, 11, 2, 6),
        z(2025, 11, 2, 7),
    ]


def test_daily_alias_follows_the_offset() -> None:
    rec = cron("@daily", "America/New_York")
    assert rec.fixed_time is True
    # Midnight EST = 05:00Z; after the spring change midnight EDT = 04:00Z.
    assert occurrences(rec, z(2025, 3, 8), 3) == [
        z(2025, 3, 8, 5),
        z(2025, 3, 9, 5),
        z(2025, 3, 10, 4),
    ]


def test_every_counts_real_time_across_new_york_dst() -> None:
    rec = parse_recurrence(every="PT90M", timezone="America/New_York", start_at=z(2025, 3, 9, 5))
    # 05:00Z = 00:00 EST; +90 min = 01:30 EST; +90 = 08:00Z... in real time, whatever the wall.
    assert occurrences(rec, z(2025, 3, 9), 4) == [
        z(2025, 3, 9, 5, 0),  # start_at itself
        z(2025, 3, 9, 6, 30),  # 01:30 EST
        z(2025, 3, 9, 8, 0),  # 04:00 EDT: 150 wall minutes later, 90 real ones
        z(2025, 3, 9, 9, 30),
    ]
    fall = parse_recurrence(every="PT90M", timezone="America/New_York", start_at=z(2025, 11, 2, 4))
    got = occurrences(fall, z(2025, 11, 2), 4)
    assert {b - a for a, b in pairwise(got)} == {timedelta(minutes=90)}


# --------------------------------------------------------------------------- Europe/London


def test_london_spring_forward_and_fall_back() -> None:
    rec = cron("30 1 * * *", "Europe/London")
    assert occurrences(rec, z(2025, 3, 29), 3) == [
        z(2025, 3, 29, 1, 30),  # 01:30 GMT
        z(2025, 3, 30, 1, 0),  # 01:30 skipped: 02:00 BST = 01:00Z
        z(2025, 3, 31, 0, 30),  # 01:30 BST
    ]
    assert occurrences(rec, z(2025, 10, 25), 3) == [
        z(2025, 10, 25, 0, 30),  # 01:30 BST
        z(2025, 10, 26, 0, 30),  # first 01:30 (BST)
        z(2025, 10, 27, 1, 30),  # 01:30 GMT
    ]
    both = cron("30 1 * * *", "Europe/London", on_overlap="both")
    assert between(both, z(2025, 10, 26), z(2025, 10, 26, 12)) == [
        z(2025, 10, 26, 0, 30),
        z(2025, 10, 26, 1, 30),  # 01:30 GMT, the second time
    ]
    skip = cron("30 1 * * *", "Europe/London", on_gap="skip")
    assert between(skip, z(2025, 3, 29, 12), z(2025, 3, 31, 12)) == [z(2025, 3, 31, 0, 30)]


# --------------------------------------------------------------------------- Australia


def test_sydney_spring_forward_and_fall_back() -> None:
    rec = cron("30 2 * * *", "Australia/Sydney")
    assert occurrences(rec, z(2025, 10, 3), 3) == [
        z(2025, 10, 3, 16, 30),  # 02:30 AEST (+10) on 10-04
        z(2025, 10, 4, 16, 0),  # 02:30 on 10-05 skipped: 03:00 AEDT = 16:00Z
        z(2025, 10, 5, 15, 30),  # 02:30 AEDT (+11) on 10-06
    ]
    assert occurrences(rec, z(2025, 4, 4), 3) == [
        z(2025, 4, 4, 15, 30),  # 02:30 AEDT on 04-05
        z(2025, 4, 5, 15, 30),  # first 02:30 on 04-06 (AEDT)
        z(2025, 4, 6, 16, 30),  # 02:30 AEST on 04-07
    ]
    both = cron("30 2 * * *", "Australia/Sydney", on_overlap="both")
    assert between(both, z(2025, 4, 5), z(2025, 4, 6)) == [
        z(2025, 4, 5, 15, 30),
        z(2025, 4, 5, 16, 30),  # 02:30 AEST, the second time
    ]


def test_lord_howe_half_hour_gap_runs_at_its_end() -> None:
    rec = cron("15 2 * * *", "Australia/Lord_Howe")
    assert occurrences(rec, z(2025, 10, 3), 3) == [
        z(2025, 10, 3, 15, 45),  # 02:15 +10:30 on 10-04
        z(2025, 10, 4, 15, 30),  # 02:15 skipped (gap 02:00-02:30): 02:30 +11 = 15:30Z
        z(2025, 10, 5, 15, 15),  # 02:15 +11 on 10-06
    ]
    skip = cron("15 2 * * *", "Australia/Lord_Howe", on_gap="skip")
    assert between(skip, z(2025, 10, 4), z(2025, 10, 5, 15, 15)) == [z(2025, 10, 5, 15, 15)]


def test_lord_howe_half_hour_overlap() -> None:
    # 01:30-02:00 happens twice on 04-06: 01:45 +11 = 14:45Z, then 01:45 +10:30 = 15:15Z.
    once = cron("45 1 * * *", "Australia/Lord_Howe")
    both = cron("45 1 * * *", "Australia/Lord_Howe", on_overlap="both")
    assert between(once, z(2025, 4, 5), z(2025, 4, 6)) == [z(2025, 4, 5, 14, 45)]
    assert between(both, z(2025, 4, 5), z(2025, 4, 6)) == [
        z(2025, 4, 5, 14, 45),
        z(2025, 4, 5, 15, 15),
    ]
    # 01:15 is before the overlap: once either way (+11 = 14:15Z).
    assert between(
        cron("15 1 * * *", "Australia/Lord_Howe", on_overlap="both"), z(2025, 4, 5), z(2025, 4, 6)
    ) == [z(2025, 4, 5, 14, 15)]


def test_lord_howe_wildcard_matches_the_real_wall_clock() -> None:
    rec = cron("*/30 * * * *", "Australia/Lord_Howe")
    # Spring: 01:30 +10:30 = 15:00Z; 02:00 never happens; 02:30 +11 = 15:30Z; 03:00 +11.
    assert between(rec, z(2025, 10, 4, 14, 45), z(2025, 10, 4, 16)) == [
        z(2025, 10, 4, 15, 0),
        z(2025, 10, 4, 15, 30),
        z(2025, 10, 4, 16, 0),
    ]
    # Fall: 01:30 +11 = 14:30Z, 01:30 +10:30 = 15:00Z, 02:00 +10:30 = 15:30Z.
    assert between(rec, z(2025, 4, 5, 14, 15), z(2025, 4, 5, 15, 30)) == [
        z(2025, 4, 5, 14, 30),
        z(2025, 4, 5, 15, 0),
        z(2025, 4, 5, 15, 30),
    ]
    # 02:45 +11 exists right after the 30-minute gap: 02:45 - 11:00 = 15:45Z.
    # cronsim's zone-aware mode skips it; the wall clock shows it, so it fires.
    hourly45 = cron("45 * * * *", "Australia/Lord_Howe")
    assert between(hourly45, z(2025, 10, 4, 15), z(2025, 10, 4, 17)) == [
        z(2025, 10, 4, 15, 15),  # 01:45 +10:30
        z(2025, 10, 4, 15, 45),  # 02:45 +11
        z(2025, 10, 4, 16, 45),  # 03:45 +11
    ]


# --------------------------------------------------------------------------- odd offsets


def test_kathmandu_quarter_hour_offset() -> None:
    rec = cron("0 9 * * *", "Asia/Kathmandu")
    # 09:00 +05:45 = 03:15Z, every day (no DST).
    assert occurrences(rec, z(2025, 6, 1), 2) == [z(2025, 6, 1, 3, 15), z(2025, 6, 2, 3, 15)]
    # :00 and :30 local are :15 and :45 UTC.
    half = cron("*/30 * * * *", "Asia/Kathmandu")
    assert occurrences(half, z(2025, 6, 1), 2) == [z(2025, 6, 1, 0, 15), z(2025, 6, 1, 0, 45)]


def test_sao_paulo_midnight_gap_2018_and_no_dst_2019() -> None:
    rec = cron("0 0 * * *", "America/Sao_Paulo")
    assert occurrences(rec, z(2018, 11, 2, 12), 3) == [
        z(2018, 11, 3, 3),  # 00:00 -03
        z(2018, 11, 4, 3),  # midnight does not exist: 01:00 -02 = 03:00Z
        z(2018, 11, 5, 2),  # 00:00 -02
    ]
    # DST was abolished in 2019: midnight is 03:00Z every day of November 2019.
    assert occurrences(rec, z(2019, 11, 2, 12), 3) == [
        z(2019, 11, 3, 3),
        z(2019, 11, 4, 3),
        z(2019, 11, 5, 3),
    ]


def test_sao_paulo_last_fall_back_2019() -> None:
    # 2019-02-16 23:00-24:00 happened twice: 23:00 -02 = 01:00Z, then 23:00 -03 = 02:00Z.
    once = cron("0 23 * * *", "America/Sao_Paulo")
    both = cron("0 23 * * *", "America/Sao_Paulo", on_overlap="both")
    assert occurrences(once, z(2019, 2, 16, 12), 2) == [z(2019, 2, 17, 1), z(2019, 2, 18, 2)]
    assert occurrences(both, z(2019, 2, 16, 12), 3) == [
        z(2019, 2, 17, 1),
        z(2019, 2, 17, 2),
        z(2019, 2, 18, 2),  # 23:00 -03 on 02-17
    ]


def test_apia_skipped_day_is_not_collapsed() -> None:
    # Dec 30 2011 never existed in Apia. cronie treats a jump over 3 hours as a clock change,
    # not DST, and does not run the fixed-time jobs it skipped: Dec 29 and Dec 31 only.
    # (cronsim would also fire at 2011-12-31 00:00 +14 = 10:00Z.)
    for on_gap in ("run_after", "skip"):
        rec = cron("0 12 * * *", "Pacific/Apia", on_gap=on_gap)
        assert occurrences(rec, z(2011, 12, 29), 3) == [
            z(2011, 12, 29, 22),  # 12:00 -10 on Dec 29
            z(2011, 12, 30, 22),  # 12:00 +14 on Dec 31: 24 real hours later
            z(2011, 12, 31, 22),  # 12:00 +14 on Jan 1
        ]
    # A wildcard job keeps its hourly rhythm: 23:00 -10 = 09:00Z, then 00:00 +14 = 10:00Z.
    hourly = cron("0 * * * *", "Pacific/Apia")
    assert occurrences(hourly, z(2011, 12, 30, 8, 30), 3) == [
        z(2011, 12, 30, 9),
        z(2011, 12, 30, 10),
        z(2011, 12, 30, 11),
    ]


# --------------------------------------------------------------------------- calendar


def test_feb_29_fires_only_on_leap_days() -> None:
    rec = cron("0 9 29 2 *")
    assert occurrences(rec, z(2025, 1, 1), 3) == [
        z(2028, 2, 29, 9),
        z(2032, 2, 29, 9),
        z(2036, 2, 29, 9),
    ]
    # 2100 is not a leap year: from 2097 the next Feb 29 is in 2104.
    assert next_after(rec, z(2097, 1, 1)) == z(2104, 2, 29, 9)
    tokyo = cron("0 9 29 2 *", "Asia/Tokyo")
    assert next_after(tokyo, z(2025, 1, 1)) == z(2028, 2, 29, 0)  # 09:00 +09


def test_end_of_month() -> None:
    last = cron("0 0 L * *")
    assert occurrences(last, z(2027, 12, 31, 12), 4) == [
        z(2028, 1, 31),
        z(2028, 2, 29),  # leap year
        z(2028, 3, 31),
        z(2028, 4, 30),
    ]
    # "31" fires only in months that have a 31st (cronie): Feb and Apr are skipped.
    day31 = cron("0 0 31 * *")
    assert occurrences(day31, z(2025, 1, 1), 3) == [z(2025, 1, 31), z(2025, 3, 31), z(2025, 5, 31)]


def test_aliases() -> None:
    assert CRON_ALIASES["@annually"] == CRON_ALIASES["@yearly"] == "0 0 1 1 *"
    assert next_after(cron("@yearly"), z(2025, 6, 1)) == z(2026, 1, 1)
    assert next_after(cron("@ANNUALLY"), z(2025, 6, 1)) == z(2026, 1, 1)
    assert next_after(cron("@monthly"), z(2025, 6, 15)) == z(2025, 7, 1)
    assert next_after(cron("@weekly"), z(2025, 6, 4)) == z(2025, 6, 8)  # a Sunday
    assert next_after(cron("@midnight"), z(2025, 6, 4, 12)) == z(2025, 6, 5)
    assert next_after(cron("@hourly"), z(2025, 6, 4, 12, 1)) == z(2025, 6, 4, 13)
    assert cron("@Daily").cron == "@daily"
    assert cron("@daily").expression == "0 0 * * *"


def test_fixed_time_classification() -> None:
    assert cron("30 2 * * *").fixed_time
    assert cron("0 0 L * *").fixed_time
    assert cron("0,30 9-17 * * MON-FRI").fixed_time
    assert not cron("*/30 * * * *").fixed_time
    assert not cron("0 */2 * * *").fixed_time
    assert not cron("15 * * * *").fixed_time
    assert not cron("* 2 * * *").fixed_time
    interval = parse_recurrence(every=60)
    assert not interval.fixed_time
    assert interval.kind == "interval"
    assert cron("@daily").kind == "cron"


# --------------------------------------------------------------------------- bounds


def test_start_at_and_end_at_are_inclusive() -> None:
    rec = parse_recurrence(
        cron="0 9 * * *", timezone="UTC", start_at=z(2025, 1, 2, 9), end_at=z(2025, 1, 4, 9)
    )
    assert occurrences(rec, z(2024, 12, 1), 10) == [
        z(2025, 1, 2, 9),
        z(2025, 1, 3, 9),
        z(2025, 1, 4, 9),
    ]
    assert next_after(rec, z(2025, 1, 4, 9)) is None


def test_interval_grid_does_not_drift() -> None:
    rec = parse_recurrence(every=timedelta(minutes=7), start_at=z(2025, 1, 1, 0, 0))
    # Whenever we ask, the answer is on 00:00 + k * 7 min.
    assert next_after(rec, z(2025, 1, 1, 1, 0)) == z(2025, 1, 1, 1, 3)  # 63 = 9 * 7
    assert next_after(rec, z(2025, 1, 1, 1, 3)) == z(2025, 1, 1, 1, 10)
    assert next_after(
        rec,
        z(
            2025,
            1,
            1,
            1,
            3,
        )
        + timedelta(microseconds=1),
    ) == z(2025, 1, 1, 1, 10)
    # Without start_at: on the anchor's grid, else on `after`'s.
    free = parse_recurrence(every="PT1H")
    assert next_after(free, z(2025, 1, 1, 10, 30), anchor=z(2025, 1, 1, 0, 15)) == z(
        2025, 1, 1, 11, 15
    )
    assert next_after(free, z(2025, 1, 1, 10, 30)) == z(2025, 1, 1, 11, 30)
    stream = iter_occurrences(free, z(2024, 12, 31), anchor=z(2025, 1, 1))
    assert [next(stream) for _ in range(2)] == [z(2025, 1, 1), z(2025, 1, 1, 1)]


def test_every_forms() -> None:
    assert parse_recurrence(every=90).every == timedelta(seconds=90)
    assert parse_recurrence(every="PT90M").every == timedelta(minutes=90)
    assert parse_recurrence(every="P1D").every == timedelta(hours=24)  # real hours
    assert parse_recurrence(every="P1W").every == timedelta(days=7)
    assert parse_recurrence(every=timedelta(seconds=5)).every == timedelta(seconds=5)


# --------------------------------------------------------------------------- catch-up


def test_catch_up_policies_for_cron() -> None:
    rec = cron("0 * * * *")
    last, now = z(2025, 1, 1, 0), z(2025, 1, 1, 5, 30)
    # Missed while down: 01:00, 02:00, 03:00, 04:00, 05:00. Next: 06:00.
    assert catch_up_due(rec, last, now, "latest") == ([z(2025, 1, 1, 5)], z(2025, 1, 1, 6))
    assert catch_up_due(rec, last, now, "none") == ([], z(2025, 1, 1, 6))
    assert catch_up_due(rec, last, now, "all") == (
        [z(2025, 1, 1, h) for h in range(1, 6)],
        z(2025, 1, 1, 6),
    )
    # Capped: the first two, and the next one still due (<= now) says "call again".
    assert catch_up_due(rec, last, now, "all", limit=2) == (
        [z(2025, 1, 1, 1), z(2025, 1, 1, 2)],
        z(2025, 1, 1, 3),
    )
    # Nothing missed: an occurrence exactly at `now` is due, none before it.
    assert catch_up_due(rec, z(2025, 1, 1, 4), z(2025, 1, 1, 5), "latest") == (
        [z(2025, 1, 1, 5)],
        z(2025, 1, 1, 6),
    )
    assert catch_up_due(rec, z(2025, 1, 1, 5), z(2025, 1, 1, 5, 30), "all") == (
        [],
        z(2025, 1, 1, 6),
    )
    # A clock behind the last firing: nothing due, next after the last firing.
    assert catch_up_due(rec, z(2025, 1, 1, 5), z(2025, 1, 1, 4), "all") == ([], z(2025, 1, 1, 6))


def test_catch_up_for_interval_is_on_the_anchor_grid() -> None:
    rec = parse_recurrence(every="PT90M")
    # Anchor 00:00; missed 01:30, 03:00, 04:30; next 06:00.
    last, now = z(2025, 1, 1), z(2025, 1, 1, 5)
    assert catch_up_due(rec, last, now, "latest") == ([z(2025, 1, 1, 4, 30)], z(2025, 1, 1, 6))
    assert catch_up_due(rec, last, now, "all")[0] == [
        z(2025, 1, 1, 1, 30),
        z(2025, 1, 1, 3),
        z(2025, 1, 1, 4, 30),
    ]


def test_catch_up_after_end_and_long_downtime() -> None:
    rec = parse_recurrence(cron="*/5 * * * *", end_at=z(2025, 1, 1, 1), now=NOW)
    assert catch_up_due(rec, z(2025, 1, 1), z(2025, 2, 1), "latest") == ([z(2025, 1, 1, 1)], None)
    # Ten years of a 5-minute schedule: latest is found without walking a million firings.
    busy = cron("*/5 * * * *")
    due, upcoming = catch_up_due(busy, z(2015, 1, 1), z(2025, 1, 1, 0, 7), "latest")
    assert (due, upcoming) == ([z(2025, 1, 1, 0, 5)], z(2025, 1, 1, 0, 10))
    sparse = cron("0 0 29 2 *")
    assert catch_up_due(sparse, z(2000, 1, 1), z(2025, 1, 1), "latest") == (
        [z(2024, 2, 29)],
        z(2028, 2, 29),
    )


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "expr",
    [
        "",
        "   ",
        "hello",
        "* * *",
        "0 0 0 * * *",  # a seconds field: not a 5-field cron
        "61 * * * *",
        "* 24 * * *",
        "* * 32 * *",
        "* * * 13 *",
        "* * * * 8",
        "0 0 30 2 *",  # Feb 30 never exists
        "0 0 31 4,6,9,11 *",
        "@reboot",
        "@fortnightly",
        "*/0 * * * *",
    ],
)
def test_invalid_cron_names_the_field(expr: str) -> None:
    with pytest.raises(InvalidCron) as info:
        parse_recurrence(cron=expr, now=NOW)
    assert info.value.field == "cron"


def test_cron_that_only_matches_inside_gaps_never_fires() -> None:
    # 02:xx on the second Sunday of March (SUN#2) is always inside New York's gap (since 2007); a
    # wildcard job never sees those minutes, so it would never fire.
    with pytest.raises(InvalidCron, match="never fires"):
        parse_recurrence(cron="* 2 * 3 SUN#2", timezone="America/New_York", now=NOW)
    # A fixed-time job told to skip gaps never fires either; run_after fires at 03:00 EDT.
    with pytest.raises(InvalidCron):
        parse_recurrence(cron="30 2 * 3 SUN#2", timezone="America/New_York", on_gap="skip", now=NOW)
    rec = parse_recurrence(cron="30 2 * 3 SUN#2", timezone="America/New_York", now=NOW)
    assert next_after(rec, NOW) == z(2025, 3, 9, 7)
    # In UTC the same minutes exist.
    assert next_after(parse_recurrence(cron="* 2 * 3 SUN#2", now=NOW), NOW) == z(2025, 3, 9, 2)


def test_cron_type_and_size_errors() -> None:
    with pytest.raises(InvalidCron):
        parse_recurrence(cron=5, now=NOW)  # type: ignore[arg-type]
    with pytest.raises(InvalidCron):
        parse_recurrence(cron="* " * 200, now=NOW)


@pytest.mark.parametrize("every", ["P1M", "P1Y", "PT0S", 0, "soon", "-PT5M", True, [1], 0.5])
def test_invalid_every_names_the_field(every: object) -> None:
    with pytest.raises(InvalidInput) as info:
        parse_recurrence(every=every)  # type: ignore[arg-type]
    assert info.value.field == "every"


def test_other_bad_input_names_the_field() -> None:
    cases: list[tuple[dict[str, object], str]] = [
        ({}, "cron"),
        ({"cron": "@daily", "every": 60}, "every"),
        ({"cron": "@daily", "timezone": "Mars/Olympus"}, "timezone"),
        ({"cron": "@daily", "on_gap": "later"}, "on_gap"),
        ({"cron": "@daily", "on_overlap": "twice"}, "on_overlap"),
        ({"cron": "@daily", "start_at": datetime(2025, 1, 1)}, "start_at"),
        ({"cron": "@daily", "end_at": "2025-01-01"}, "end_at"),
        ({"cron": "@daily", "start_at": z(2025, 2, 1), "end_at": z(2025, 1, 1)}, "end_at"),
    ]
    for kwargs, field in cases:
        with pytest.raises(InvalidInput) as info:
            parse_recurrence(now=NOW, **kwargs)  # type: ignore[arg-type]
        assert info.value.field == field, kwargs
    with pytest.raises(UnknownTimezone):
        parse_recurrence(cron="@daily", timezone="Mars/Olympus")
    with pytest.raises(InvalidInput) as caught:
        parse_catch_up("sometimes")
    assert caught.value.field == "catch_up"
    assert parse_catch_up("all") == "all"


def test_naive_instants_are_programming_errors() -> None:
    rec = cron("@daily")
    with pytest.raises(ValueError, match="timezone-aware"):
        next_after(rec, datetime(2025, 1, 1))
    with pytest.raises(ValueError, match="timezone-aware"):
        list(occurrences_between(rec, z(2025, 1, 1), datetime(2025, 1, 2)))
    with pytest.raises(ValueError, match="negative"):
        occurrences(rec, z(2025, 1, 1), -1)
    assert occurrences(rec, z(2025, 1, 1), 0) == []
    with pytest.raises(ValueError, match="limit"):
        catch_up_due(rec, z(2025, 1, 1), z(2025, 1, 2), "all", limit=0)
    with pytest.raises(InvalidInput):
        catch_up_due(rec, z(2025, 1, 1), z(2025, 1, 2), "most")  # type: ignore[arg-type]


def test_non_utc_inputs_give_utc_answers() -> None:
    rec = cron("30 2 * * *", "America/New_York")
    eastern = datetime(2025, 3, 8, 12, tzinfo=rec.zone)
    answer = next_after(rec, eastern)
    assert answer == z(2025, 3, 9, 7)
    assert answer is not None
    assert answer.tzinfo is UTC


def test_describe() -> None:
    assert describe(cron("30 2 * * *", "America/New_York")) == (
        "At 02:30 every day (America/New_York)"
    )
    skip = describe(cron("30 2 * * *", "America/New_York", on_gap="skip", on_overlap="both"))
    assert skip == (
        "At 02:30 every day (America/New_York); in a DST gap: skipped; in a repeated hour: both"
    )
    assert describe(parse_recurrence(every="PT90M")) == "Every 1 hour 30 minutes of real time"
    bounded = parse_recurrence(every=1.5, start_at=z(2025, 1, 1), end_at=z(2025, 1, 2))
    assert describe(bounded).startswith("Every 1.5 seconds of real time, from 2025-01-01")


def test_latest_catch_up_from_the_distant_past() -> None:
    # An anchor two thousand years back: the look-back windows stop at the anchor.
    rec = cron("0 0 29 2 *")
    ancient = datetime(5, 1, 1, tzinfo=UTC)
    assert catch_up_due(rec, ancient, z(2025, 1, 1), "latest") == ([z(2024, 2, 29)], z(2028, 2, 29))


def test_stored_alias_in_any_case_still_expands() -> None:
    assert Recurrence(cron="@DAILY", every=None).expression == "0 0 * * *"
