"""Calendar rules asked far from DTSTART: the expansion resumes near the position and yields
exactly what the walk from DTSTART yields; a rule that can never fire is refused in bounded
time, whatever part makes it impossible."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import islice
from zoneinfo import ZoneInfo

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from duetime.errors import InvalidRrule, RuleTooCostly
from duetime.timemath.recurrence.calendar import (
    calendar_instants,
    parse_calendar,
    rule_walls,
)

NEW_YORK = ZoneInfo("America/New_York")
DAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
TAKE = 12
# How far past DTSTART a drawn position lies: the walk from DTSTART must stay affordable.
REACH = {
    "SECONDLY": timedelta(hours=2),
    "MINUTELY": timedelta(days=3),
    "HOURLY": timedelta(days=120),
    "DAILY": timedelta(days=3000),
    "WEEKLY": timedelta(days=6000),
    "MONTHLY": timedelta(days=15000),
    "YEARLY": timedelta(days=40000),
}


@st.composite
def rules(draw: st.DrawFn) -> str:
    freq = draw(st.sampled_from(tuple(REACH)))
    parts = [f"FREQ={freq}", f"INTERVAL={draw(st.integers(1, 4))}"]
    numbered = freq in ("MONTHLY", "YEARLY") and draw(st.booleans())
    days = draw(st.sets(st.sampled_from(DAYS), max_size=4))
    if days:
        if numbered:
            parts.append(
                "BYDAY=" + ",".join(f"{draw(st.sampled_from((1, 2, -1)))}{d}" for d in days)
            )
        else:
            parts.append("BYDAY=" + ",".join(sorted(days)))
    if freq != "WEEKLY" and draw(st.booleans()):
        values = draw(st.sets(st.sampled_from((1, 2, 13, 15, 28, 29, 31, -1)), min_size=1))
        parts.append("BYMONTHDAY=" + ",".join(map(str, sorted(values))))
    if draw(st.booleans()):
        parts.append(
            "BYMONTH="
            + ",".join(map(str, sorted(draw(st.sets(st.integers(1, 12), min_size=1, max_size=5)))))
        )
    for part, low, high in (("BYHOUR", 0, 23), ("BYMINUTE", 0, 59), ("BYSECOND", 0, 59)):
        if draw(st.integers(0, 3)) == 0:
            values = draw(st.sets(st.integers(low, high), min_size=1, max_size=3))
            parts.append(f"{part}=" + ",".join(map(str, sorted(values))))
    if len(parts) > 2 and draw(st.booleans()):
        parts.append("BYSETPOS=" + draw(st.sampled_from(("1", "-1", "2", "1,-1", "3"))))
    if draw(st.booleans()):
        parts.append("WKST=" + draw(st.sampled_from(DAYS)))
    return ";".join(parts)


@settings(max_examples=150, deadline=None)
@given(
    rules(),
    st.datetimes(datetime(2020, 1, 1), datetime(2026, 12, 31)).map(
        lambda d: d.replace(microsecond=0)
    ),
    st.floats(0, 1),
)
def test_resumed_expansion_yields_what_the_walk_from_dtstart_yields(
    rule: str, dtstart: datetime, fraction: float
) -> None:
    try:
        calendar = parse_calendar(rrule=rule, dtstart=dtstart.isoformat(), zone=NEW_YORK)
    except (InvalidRrule, RuleTooCostly):
        assume(False)
        raise
    near = dtstart + REACH[rule.split(";")[0][5:]] * fraction
    from_dtstart = (w for w in rule_walls(calendar) if w >= near)
    resumed = (w for w in rule_walls(calendar, near) if w >= near)
    assert list(islice(resumed, TAKE)) == list(islice(from_dtstart, TAKE))


@settings(max_examples=60, deadline=None)
@given(
    rules(),
    st.sampled_from(("America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "Pacific/Apia")),
    st.datetimes(datetime(2010, 1, 1), datetime(2012, 12, 31)).map(
        lambda d: d.replace(microsecond=0)
    ),
    st.floats(0, 1),
    # Not "skip": it may skip every occurrence.
    st.sampled_from((None, "forward", "backward", "modified_forward", "modified_backward")),
)
def test_next_instants_far_from_dtstart_are_those_of_the_whole_walk(
    rule: str, zone_name: str, dtstart: datetime, fraction: float, roll: str | None
) -> None:
    """Zones with DST, a 30-minute shift and a skipped day (Apia, 2011-12-30), with rolls."""
    zone = ZoneInfo(zone_name)
    try:
        calendar = parse_calendar(
            rrule=rule,
            dtstart=dtstart.isoformat(),
            zone=zone,
            roll=roll,
            holiday_dates=["2011-12-31", "2012-01-02"] if roll else None,
        )
    except (InvalidRrule, RuleTooCostly):
        assume(False)
        raise
    # A tenth of the reach: the reference resolves every instant from 2009 on.
    after = (dtstart + REACH[rule.split(";")[0][5:]] * fraction / 10).replace(tzinfo=UTC)
    whole = calendar_instants(calendar, zone, datetime(2009, 1, 1, tzinfo=UTC))
    expected = list(islice((i for i in whole if i > after), TAKE))
    assert list(islice(calendar_instants(calendar, zone, after), TAKE)) == expected


def test_a_rule_years_old_resumes_at_the_period_that_holds_the_position() -> None:
    calendar = parse_calendar(
        rrule="FREQ=SECONDLY;INTERVAL=7", dtstart="1990-01-01T00:00:00", zone=NEW_YORK
    )
    near = datetime(2031, 5, 6, 7, 8, 9)
    first = next(rule_walls(calendar, near))
    assert near - timedelta(seconds=7) < first <= near  # not 1990, as from DTSTART
    assert (first - calendar.dtstart).total_seconds() % 7 == 0


@pytest.mark.timeout(60)
def test_the_next_occurrence_of_an_old_secondly_rule() -> None:
    calendar = parse_calendar(
        rrule="FREQ=SECONDLY;INTERVAL=10", dtstart="2000-01-01T00:00:00", zone=ZoneInfo("UTC")
    )
    after = datetime(2040, 1, 1, 0, 0, 5, tzinfo=UTC)
    got = list(islice(calendar_instants(calendar, ZoneInfo("UTC"), after), 2))
    assert got == [
        datetime(2040, 1, 1, 0, 0, 10, tzinfo=UTC),
        datetime(2040, 1, 1, 0, 0, 20, tzinfo=UTC),
    ]


def test_count_is_counted_from_dtstart_however_late_the_question() -> None:
    calendar = parse_calendar(
        rrule="FREQ=HOURLY;COUNT=10", dtstart="2027-01-01T09:00", zone=NEW_YORK
    )
    late = datetime(2027, 1, 1, 17, 30, tzinfo=NEW_YORK)
    assert list(calendar_instants(calendar, NEW_YORK, late)) == [
        datetime(2027, 1, 1, 18, 0, tzinfo=NEW_YORK).astimezone(UTC)
    ]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("rule", "dtstart"),
    [
        ("FREQ=SECONDLY;BYHOUR=9;BYSETPOS=2", "2027-01-01T09:00:00"),  # one time a period
        ("FREQ=MINUTELY;BYSECOND=0,30;BYSETPOS=3,-3", "2027-01-01T09:00:00"),
        ("FREQ=HOURLY;BYMINUTE=0;BYSETPOS=2", "2027-01-01T09:00:00"),
        ("FREQ=DAILY;BYHOUR=9,17;BYSETPOS=3", "2027-01-01T09:00:00"),
        ("FREQ=MONTHLY;BYDAY=MO;BYMONTHDAY=1,2,3;BYSETPOS=2", "2027-01-01T09:00:00"),
        ("FREQ=MONTHLY;BYDAY=5MO;BYMONTHDAY=1", "2027-01-01T09:00:00"),
        ("FREQ=YEARLY;BYDAY=-1SU;BYMONTH=2;BYMONTHDAY=1", "2027-01-01T09:00:00"),
        ("FREQ=DAILY;INTERVAL=7;BYDAY=MO", "2027-01-05T09:00:00"),  # a Tuesday: never Monday
    ],
)
def test_a_rule_that_can_never_fire_is_refused_in_bounded_time(rule: str, dtstart: str) -> None:
    with pytest.raises(InvalidRrule) as caught:
        parse_calendar(rrule=rule, dtstart=dtstart, zone=NEW_YORK)
    assert caught.value.field == "rrule"
    assert "never" in caught.value.message or "no occurrence" in caught.value.message


def test_a_rare_rule_is_kept() -> None:
    """Five Mondays in February: only when 1 February of a leap year is a Monday (2044)."""
    calendar = parse_calendar(
        rrule="FREQ=YEARLY;BYMONTH=2;BYDAY=5MO", dtstart="2027-01-01T09:00", zone=NEW_YORK
    )
    first = next(calendar_instants(calendar, NEW_YORK, datetime(2027, 1, 1, tzinfo=UTC)))
    assert first.astimezone(NEW_YORK).date().isoformat() == "2044-02-29"
