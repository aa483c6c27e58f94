"""How far a recurrence is searched before it is said never to fire: one bound per kind of rule.

Cron is walked by cronsim, which gives up after 50 years without a match; an RFC 5545 rule's
``INTERVAL`` spaces occurrences as far as it likes, so it is searched longer. Each error states
the bound that was searched.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from duetime.errors import InvalidCron, InvalidRrule
from duetime.timemath.recurrence import (
    CRON_SEARCH_YEARS,
    RULE_SEARCH_YEARS,
    iter_occurrences,
    parse_recurrence,
)
from duetime.timemath.recurrence.calendar import calendar_instants, parse_calendar
from duetime.timemath.tzmath import load_zone

NOW = datetime(2026, 1, 1, tzinfo=UTC)
UTC_ZONE = load_zone("UTC")


def test_the_bounds_differ_because_what_they_search_differs() -> None:
    assert CRON_SEARCH_YEARS == 50
    assert RULE_SEARCH_YEARS == 100


def test_a_cron_gap_within_the_cron_search_is_walked_across() -> None:
    # A fifth Monday in February: 2072, then 2112 (2100 has no 29 February), 40 years on.
    rec = parse_recurrence(cron="0 0 * 2 MON#5", now=NOW)
    walk = iter_occurrences(rec, NOW)
    found = [next(walk) for _ in range(3)]
    assert [d.year for d in found] == [2044, 2072, 2112]
    assert found[2].year - found[1].year < CRON_SEARCH_YEARS


def test_a_cron_that_never_fires_names_the_cron_search() -> None:
    with pytest.raises(InvalidCron, match=f"no match within {CRON_SEARCH_YEARS} years"):
        # 02:xx on the second Sunday of March is inside New York's gap every year.
        parse_recurrence(cron="* 2 * 3 SUN#2", timezone="America/New_York", now=NOW)


@pytest.mark.parametrize("interval", [CRON_SEARCH_YEARS + 10, RULE_SEARCH_YEARS - 1])
def test_a_rule_gap_within_the_rule_search_is_walked_across(interval: int) -> None:
    cal = parse_calendar(
        rrule=f"FREQ=YEARLY;INTERVAL={interval}", dtstart="2027-01-01T09:00", zone=UTC_ZONE
    )
    walk = calendar_instants(cal, UTC_ZONE, NOW)
    assert [next(walk).year for _ in range(2)] == [2027, 2027 + interval]


def test_a_rule_gap_beyond_the_rule_search_ends_the_walk() -> None:
    interval = RULE_SEARCH_YEARS + 1
    cal = parse_calendar(
        rrule=f"FREQ=YEARLY;INTERVAL={interval}", dtstart="2027-01-01T09:00", zone=UTC_ZONE
    )
    walk = calendar_instants(cal, UTC_ZONE, NOW)
    assert next(walk).year == 2027
    assert next(walk, None) is None


def test_a_rule_that_never_fires_names_the_rule_search() -> None:
    with pytest.raises(InvalidRrule, match=f"within {RULE_SEARCH_YEARS} years of DTSTART"):
        parse_calendar(
            rrule="FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30", dtstart="2027-01-01T09:00", zone=UTC_ZONE
        )
