"""Business days as payroll expects them: the modified rolls, and what each edge does (COUNT
and the 29 February stand-ins, observed holidays, an RDATE on a holiday, a roll back past
DTSTART, a skip that would drop too many in a row)."""

from __future__ import annotations

import calendar as calendar_module
from datetime import UTC, date, datetime, timedelta
from itertools import islice

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from duetime.errors import InvalidInput
from duetime.timemath.recurrence.business import (
    ROLLS,
    business_day,
    check_roll,
    is_business_day,
)
from duetime.timemath.recurrence.calendar import (
    MAX_DROPPED,
    Calendar,
    calendar_instants,
    parse_calendar,
)
from duetime.timemath.tzmath import load_zone

BERLIN = load_zone("Europe/Berlin")
NEW_YORK = load_zone("America/New_York")
WEEKEND = (5, 6)


def _days(cal: Calendar, zone: object, after: datetime, count: int) -> list[str]:
    got = islice(calendar_instants(cal, zone, after), count)  # type: ignore[arg-type]
    return [i.astimezone(zone).date().isoformat() for i in got]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("roll", "expected"),
    [
        # 2027: 1 May and 31 July are Saturdays; 31 October a Sunday.
        ("forward", ["2027-05-03", "2027-08-02", "2027-11-01"]),
        ("backward", ["2027-04-30", "2027-07-30", "2027-10-29"]),
        # Forward unless that leaves the month, then backward.
        ("modified_forward", ["2027-05-03", "2027-07-30", "2027-10-29"]),
        # Backward unless that leaves the month, then forward.
        ("modified_backward", ["2027-05-03", "2027-07-30", "2027-10-29"]),
    ],
)
def test_month_ends_and_starts_stay_in_their_month(roll: str, expected: list[str]) -> None:
    cal = parse_calendar(
        rrule="FREQ=MONTHLY;BYMONTHDAY=1,-1",
        dtstart="2027-05-01T09:00",
        zone=BERLIN,
        roll=roll,
        exdates=[
            f"2027-{m:02d}-{d:02d}T09:00"
            for m in range(5, 11)
            for d in (1, calendar_module.monthrange(2027, m)[1])
            if (m, d) not in ((5, 1), (7, 31), (10, 31))
        ],
    )
    got = _days(cal, BERLIN, datetime(2027, 4, 1, tzinfo=UTC), 3)
    assert got == expected


def test_modified_rolls_with_public_holidays() -> None:
    # Berlin 2029: Good Friday 30 March, Easter Monday 2 April; 31 March a Saturday, 1 April
    # Easter Sunday. The month-end run of 31 March rolls back to Thursday the 29th either way;
    # the 1st of April (Sunday, then Easter Monday) goes forward to Tuesday the 3rd.
    for roll in ("modified_forward", "modified_backward"):
        cal = parse_calendar(
            rrule="FREQ=MONTHLY;BYMONTHDAY=1,-1;COUNT=4",
            dtstart="2029-02-28T09:00",
            zone=BERLIN,
            holidays="DE-BE",
            roll=roll,
        )
        got = _days(cal, BERLIN, datetime(2029, 2, 1, tzinfo=UTC), 5)
        assert got == ["2029-02-28", "2029-03-01", "2029-03-29", "2029-04-03"], roll


def test_a_month_without_a_business_day_leaves_it_the_first_way() -> None:
    closed = [(date(2027, 2, 1) + timedelta(days=n)).isoformat() for n in range(28)]
    forward = parse_calendar(
        rrule="FREQ=MONTHLY;BYMONTHDAY=15;COUNT=1",
        dtstart="2027-02-15T09:00",
        zone=BERLIN,
        holiday_dates=closed,
        roll="modified_forward",
    )
    assert _days(forward, BERLIN, datetime(2027, 1, 1, tzinfo=UTC), 2) == ["2027-03-01"]
    backward = parse_calendar(
        rrule="FREQ=MONTHLY;BYMONTHDAY=15;COUNT=1",
        dtstart="2027-02-15T09:00",
        zone=BERLIN,
        holiday_dates=closed,
        roll="modified_backward",
    )
    assert _days(backward, BERLIN, datetime(2027, 1, 1, tzinfo=UTC), 2) == ["2027-01-29"]


@settings(max_examples=300, deadline=None)
@given(
    day=st.dates(date(2020, 1, 1), date(2035, 12, 31)),
    weekend=st.sets(st.integers(0, 6), max_size=3).map(lambda s: tuple(sorted(s))),
    offsets=st.sets(st.integers(-12, 12), max_size=10),
    roll=st.sampled_from(("modified_forward", "modified_backward")),
)
def test_a_modified_roll_is_the_nearest_business_day_its_way_within_the_month(
    day: date, weekend: tuple[int, ...], offsets: set[int], roll: str
) -> None:
    dates = tuple(sorted(day + timedelta(days=n) for n in offsets))
    got = business_day(day, roll, weekend, None, dates)  # type: ignore[arg-type]

    def open_(d: date) -> bool:
        return d.weekday() not in weekend and d not in dates

    length = calendar_module.monthrange(day.year, day.month)[1]
    month = [day.replace(day=n) for n in range(1, length + 1)]
    later = [d for d in month if d >= day and open_(d)]
    earlier = [d for d in month if d <= day and open_(d)]
    if roll == "modified_forward":
        expected = later[0] if later else earlier[-1] if earlier else None
    else:
        expected = earlier[-1] if earlier else later[0] if later else None
    if expected is not None:
        assert got == expected
    else:  # no business day in the month: out of it, the first way, to the nearest
        assert got is not None
        assert got.month != day.month
        assert is_business_day(got, weekend, None, dates)
        between = range(1, abs((got - day).days))
        step = 1 if got > day else -1
        assert not any(open_(day + timedelta(days=n * step)) for n in between)


def test_a_roll_outside_the_choices_is_refused_naming_roll() -> None:
    assert check_roll("modified_forward") == "modified_forward"
    assert set(ROLLS) == {"skip", "forward", "backward", "modified_forward", "modified_backward"}
    with pytest.raises(InvalidInput) as caught:
        parse_calendar(
            rrule="FREQ=MONTHLY",
            dtstart="2027-01-15T09:00",
            zone=BERLIN,
            roll="modified_following",
        )
    assert caught.value.field == "roll"
    assert "'modified_forward'" in caught.value.message
    assert "modified following" in caught.value.message


# What the edges do.


@pytest.mark.parametrize(
    ("feb29", "expected"),
    [
        ("feb28", ["2028-02-29", "2029-02-28", "2030-02-28"]),
        ("mar1", ["2028-02-29", "2029-03-01", "2030-03-01"]),
        ("skip", ["2028-02-29", "2032-02-29", "2036-02-29"]),
    ],
)
def test_count_counts_the_stand_ins_of_29_february(feb29: str, expected: list[str]) -> None:
    cal = parse_calendar(
        rrule="FREQ=YEARLY;COUNT=3", dtstart="2028-02-29T09:00", zone=BERLIN, feb29=feb29
    )
    assert _days(cal, BERLIN, datetime(2028, 1, 1, tzinfo=UTC), 10) == expected


def test_observed_holidays_are_not_business_days() -> None:
    # 4 July 2026 is a Saturday: the US observes it on Friday the 3rd, which the holidays
    # package lists, so a weekday rule skips the 3rd and a forward roll passes it.
    weekdays = parse_calendar(
        rrule="FREQ=DAILY;BYDAY=MO,TU,WE,TH,FR",
        dtstart="2026-07-01T09:00",
        zone=NEW_YORK,
        holidays="US",
    )
    got = _days(weekdays, NEW_YORK, datetime(2026, 7, 1, tzinfo=UTC), 4)
    assert got == ["2026-07-01", "2026-07-02", "2026-07-06", "2026-07-07"]
    rolled = parse_calendar(
        rrule="FREQ=MONTHLY;BYMONTHDAY=3;COUNT=1",
        dtstart="2026-07-03T09:00",
        zone=NEW_YORK,
        holidays="US",
        roll="forward",
    )
    assert _days(rolled, NEW_YORK, datetime(2026, 7, 1, tzinfo=UTC), 2) == ["2026-07-06"]


@pytest.mark.parametrize(
    ("roll", "expected"),
    [
        ("forward", ["2027-06-01", "2027-06-03", "2027-07-01"]),
        ("backward", ["2027-06-01", "2027-07-01"]),  # rolled onto the 1st: one firing
        ("skip", ["2027-06-01", "2027-07-01"]),
    ],
)
def test_an_rdate_on_a_holiday_is_rolled_like_any_occurrence(
    roll: str, expected: list[str]
) -> None:
    cal = parse_calendar(
        rrule="FREQ=MONTHLY;BYMONTHDAY=1;COUNT=2",
        dtstart="2027-06-01T09:00",
        zone=BERLIN,
        rdates=["2027-06-02T09:00"],
        holiday_dates=["2027-06-02"],
        roll=roll,
    )
    assert _days(cal, BERLIN, datetime(2027, 5, 1, tzinfo=UTC), 5) == expected


def test_a_backward_roll_of_the_first_occurrence_fires_before_dtstart() -> None:
    # DTSTART Saturday 1 May 2027: "the 1st, or the business day before" is Friday 30 April.
    cal = parse_calendar(
        rrule="FREQ=MONTHLY;BYMONTHDAY=1;COUNT=2",
        dtstart="2027-05-01T09:00",
        zone=BERLIN,
        roll="backward",
    )
    assert _days(cal, BERLIN, datetime(2027, 4, 1, tzinfo=UTC), 5) == ["2027-04-30", "2027-06-01"]
    # Asked after it, it is gone like any past occurrence.
    after = datetime(2027, 4, 30, 12, tzinfo=UTC)
    assert _days(cal, BERLIN, after, 5) == ["2027-06-01"]


def test_a_skip_that_would_drop_too_many_in_a_row_is_refused_when_made() -> None:
    # Every 10 seconds: 17,280 occurrences on a Saturday and Sunday. A lookup stops after
    # MAX_DROPPED dropped in a row, so the rule would end, silently, at its first weekend.
    assert MAX_DROPPED < 2 * 86400 // 10
    with pytest.raises(InvalidInput) as caught:
        parse_calendar(
            rrule="FREQ=SECONDLY;INTERVAL=10", dtstart="2027-01-08T23:50", zone=BERLIN, roll="skip"
        )
    assert caught.value.field == "roll"
    assert "2027-01-09 to 2027-01-10" in caught.value.message
    # Weekdays only: the weekends drop nothing, but Easter (Good Friday to Easter Monday in
    # Berlin) drops four days' worth in a row.
    with pytest.raises(InvalidInput) as caught:
        parse_calendar(
            rrule="FREQ=SECONDLY;INTERVAL=10;BYDAY=MO,TU,WE,TH,FR",
            dtstart="2027-01-08T23:50",
            zone=BERLIN,
            holidays="DE-BE",
        )
    assert caught.value.field == "roll"
    assert "2027-03-26 to 2027-03-29" in caught.value.message
    # Without holidays that rule drops nothing, and it runs past the weekend.
    kept = parse_calendar(
        rrule="FREQ=SECONDLY;INTERVAL=10;BYDAY=MO,TU,WE,TH,FR",
        dtstart="2027-01-08T23:50",
        zone=BERLIN,
        roll="skip",
    )
    friday_late = datetime(2027, 1, 8, 22, 59, 55, tzinfo=UTC)  # 23:59:55 in Berlin
    got = list(islice(calendar_instants(kept, BERLIN, friday_late), 1))
    assert got == [datetime(2027, 1, 10, 23, 0, 0, tzinfo=UTC)]  # Monday 00:00 in Berlin
    # Every minute is fine: 2,880 on a weekend, 5,760 over Easter.
    minutely = parse_calendar(
        rrule="FREQ=MINUTELY", dtstart="2027-01-08T23:50", zone=BERLIN, holidays="DE-BE"
    )
    got = list(islice(calendar_instants(minutely, BERLIN, friday_late), 1))
    assert got == [datetime(2027, 1, 10, 23, 0, tzinfo=UTC)]


@settings(max_examples=40, deadline=None)
@given(
    freq=st.sampled_from(("SECONDLY", "MINUTELY")),
    interval=st.integers(1, 30),
    weekdays=st.sets(st.integers(0, 6), min_size=1),
    weekend=st.sets(st.integers(0, 6), min_size=1, max_size=3),
)
def test_a_skip_rule_either_runs_past_its_non_business_days_or_is_refused(
    freq: str, interval: int, weekdays: set[int], weekend: set[int]
) -> None:
    """Never a rule kept that stops for good at a run of non-business days."""
    names = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
    rule = f"FREQ={freq};INTERVAL={interval};BYDAY=" + ",".join(names[d] for d in sorted(weekdays))
    dtstart = datetime(2027, 1, 4)  # a Monday
    closed_days = [
        dtstart.date() + timedelta(days=n)
        for n in range(21)
        if (dtstart.date() + timedelta(days=n)).weekday() in weekend
    ]
    refused: InvalidInput | None = None
    try:
        cal = parse_calendar(
            rrule=rule,
            dtstart=dtstart.isoformat(),
            zone=load_zone("UTC"),
            weekend=sorted(weekend),
            roll="skip",
        )
    except InvalidInput as caught:
        refused = caught
    step = timedelta(seconds=interval) if freq == "SECONDLY" else timedelta(minutes=interval)
    # The longest run of the rule's own times on non-business days, counted by brute force
    # over the three weeks (a run of closed days repeats every week).
    longest = run = 0
    seconds = int(step.total_seconds())
    for n in range(21):
        day = dtstart + timedelta(days=n)
        if day.weekday() not in weekdays:
            continue  # no time of the rule: neither drops nor fires
        begin = int((day - dtstart).total_seconds())
        times = (begin + 86400 - 1) // seconds - (begin - 1) // seconds  # k*step in the day
        run = run + times if day.date() in closed_days else 0
        longest = max(longest, run)
    if refused is not None:
        assert refused.field == "roll"
        assert longest > MAX_DROPPED or weekdays <= weekend  # or none is on a business day
        return
    assert longest <= MAX_DROPPED
    open_days = [
        d
        for d in (dtstart.date() + timedelta(days=n) for n in range(7, 21))
        if d.weekday() in weekdays and d not in closed_days
    ]
    if open_days:  # asked at the start of the second week, it finds the next open day
        after = datetime.combine(dtstart.date() + timedelta(days=7), datetime.min.time())
        got = next(calendar_instants(cal, load_zone("UTC"), after.replace(tzinfo=UTC)))
        assert got.date() == open_days[0]


def test_a_dense_rule_on_a_date_is_checked_in_the_year_it_meets_a_weekend() -> None:
    # 29 February is a Tuesday in 2028 and a Sunday in 2032: every second of it dropped.
    with pytest.raises(InvalidInput) as caught:
        parse_calendar(
            rrule="FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=29",
            dtstart="2027-01-04T00:00",
            zone=BERLIN,
            roll="skip",
        )
    assert caught.value.field == "roll"
    assert "2032-02-28 to 2032-02-29" in caught.value.message
    # Every hour of it is 24 a day: never near the bound, never walked.
    hourly = parse_calendar(
        rrule="FREQ=HOURLY;BYMONTH=2;BYMONTHDAY=29",
        dtstart="2027-01-04T00:00",
        zone=BERLIN,
        roll="skip",
    )
    got = next(calendar_instants(hourly, BERLIN, datetime(2027, 1, 1, tzinfo=UTC)))
    assert got.astimezone(BERLIN).date() == date(2028, 2, 29)
