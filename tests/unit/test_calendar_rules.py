"""Calendar rules: the RFC 5545 examples, bad rules by part, DST, business days, 29 Feb."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rfc5545_examples import EXAMPLES, Example

from duetime.errors import InvalidInput, InvalidRrule
from duetime.timemath.recurrence.calendar import Calendar, calendar_instants, parse_calendar
from duetime.timemath.tzmath import load_zone

NEW_YORK = load_zone("America/New_York")
BERLIN = load_zone("Europe/Berlin")


def _instants(cal: Calendar, zone: object, after: datetime, count: int) -> list[datetime]:
    found = []
    for instant in calendar_instants(cal, zone, after):  # type: ignore[arg-type]
        found.append(instant)
        if len(found) == count:
            break
    return found


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e.title)
def test_rfc5545_examples_in_new_york(example: Example) -> None:
    cal = parse_calendar(
        rrule=example.rrule, dtstart=example.dtstart, zone=NEW_YORK, exdates=list(example.exdates)
    )
    expected = example.expected()
    start = cal.dtstart.replace(tzinfo=NEW_YORK) - timedelta(microseconds=1)
    asked = len(expected) if example.forever else len(expected) + 5
    got = _instants(cal, NEW_YORK, start, asked)
    assert [i.replace(tzinfo=None) for i in got] == [utc for _, utc in expected]
    assert [i.astimezone(NEW_YORK).replace(tzinfo=None) for i in got] == [
        local for local, _ in expected
    ]


@pytest.mark.parametrize(
    ("rule", "part"),
    [
        ("FREQ=DAILY;BYFOO=1", "BYFOO"),
        ("FREQ=MONTHLY;BYSETPOS=-1", "BYSETPOS"),
        ("FREQ=DAILY;COUNT=3;UNTIL=20300101T000000Z", "COUNT"),
        ("FREQ=DAILY;UNTIL=20200101T000000Z", "UNTIL"),
        ("FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30", "BYMONTHDAY"),
        ("FREQ=FORTNIGHTLY", "FREQ"),
        ("BYDAY=MO", "FREQ"),
        ("FREQ=WEEKLY;BYMONTHDAY=3", "BYMONTHDAY"),
        ("FREQ=DAILY;BYDAY=1MO", "BYDAY"),
        ("FREQ=MONTHLY;BYMONTHDAY=32", "BYMONTHDAY"),
        ("FREQ=DAILY;INTERVAL=0", "INTERVAL"),
        ("FREQ=DAILY;FREQ=WEEKLY", "FREQ"),
    ],
)
def test_bad_rules_are_refused_naming_the_part(rule: str, part: str) -> None:
    with pytest.raises(InvalidRrule) as caught:
        parse_calendar(rrule=rule, dtstart="2027-01-01T09:00", zone=NEW_YORK)
    assert caught.value.field == "rrule"
    assert part in caught.value.message


def test_rules_checked_once_for_many_zones_are_still_refused_every_time() -> None:
    # The rule's text and its "does it ever fire" check are remembered per distinct rule: a
    # good one given in many zones is the same calendar each time, a bad one is refused on
    # every call, in every zone, with the part named.
    good = [
        parse_calendar(rrule="rrule:freq=monthly;byday=MO,TU,WE,TH,FR;bysetpos=-1", **where)
        for where in (
            {"dtstart": "2025-01-31T17:00", "zone": NEW_YORK},
            {"dtstart": "2025-01-31T17:00", "zone": BERLIN},
        )
    ]
    assert good[0] == good[1]
    assert good[0].rrule == "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1"
    for zone in (NEW_YORK, BERLIN, NEW_YORK):
        with pytest.raises(InvalidRrule) as caught:
            parse_calendar(
                rrule="FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30", dtstart="2027-01-01T09:00", zone=zone
            )
        assert "BYMONTHDAY" in caught.value.message
        with pytest.raises(InvalidRrule) as caught:
            parse_calendar(rrule="FREQ=MONTHLY;BYSETPOS=-1", dtstart="2027-01-01", zone=zone)
        assert "BYSETPOS" in caught.value.message
        with pytest.raises(InvalidInput) as refused:
            parse_calendar(
                rrule="FREQ=WEEKLY;BYDAY=SA,SU", dtstart="2027-01-02T09:00", zone=zone, roll="skip"
            )
        assert refused.value.field == "roll"


def test_dtstart_is_required_and_local() -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_calendar(rrule="FREQ=DAILY", dtstart=None, zone=NEW_YORK)
    assert caught.value.field == "dtstart"
    with pytest.raises(InvalidInput) as caught:
        parse_calendar(rrule="FREQ=DAILY", dtstart="2027-01-01T09:00Z", zone=NEW_YORK)
    assert caught.value.field == "dtstart"


def test_gap_time_takes_the_offset_before_the_gap_and_overlap_fires_once() -> None:
    cal = parse_calendar(rrule="FREQ=DAILY;COUNT=3", dtstart="2025-03-08T02:30", zone=NEW_YORK)
    got = _instants(cal, NEW_YORK, datetime(2025, 3, 1, tzinfo=UTC), 5)
    # 02:30 on 03-09 does not exist: read with EST (-5), i.e. 03:30 EDT = 07:30Z.
    assert got == [
        datetime(2025, 3, 8, 7, 30, tzinfo=UTC),
        datetime(2025, 3, 9, 7, 30, tzinfo=UTC),
        datetime(2025, 3, 10, 6, 30, tzinfo=UTC),
    ]
    fall = parse_calendar(rrule="FREQ=DAILY;COUNT=2", dtstart="2025-11-02T01:30", zone=NEW_YORK)
    assert _instants(fall, NEW_YORK, datetime(2025, 11, 1, tzinfo=UTC), 5) == [
        datetime(2025, 11, 2, 5, 30, tzinfo=UTC),
        datetime(2025, 11, 3, 6, 30, tzinfo=UTC),
    ]
    both = list(
        calendar_instants(fall, NEW_YORK, datetime(2025, 11, 1, tzinfo=UTC), "skip", "both")
    )
    assert both[:2] == [
        datetime(2025, 11, 2, 5, 30, tzinfo=UTC),
        datetime(2025, 11, 2, 6, 30, tzinfo=UTC),
    ]
    skipped = list(calendar_instants(cal, NEW_YORK, datetime(2025, 3, 1, tzinfo=UTC), "skip"))
    assert datetime(2025, 3, 9, 7, 30, tzinfo=UTC) not in skipped


def test_minutely_rule_through_the_gap_stays_in_order_without_repeats() -> None:
    cal = parse_calendar(
        rrule="FREQ=MINUTELY;INTERVAL=30;COUNT=8", dtstart="2025-03-09T01:00", zone=NEW_YORK
    )
    got = list(calendar_instants(cal, NEW_YORK, datetime(2025, 3, 9, tzinfo=UTC)))
    assert got == sorted(set(got))
    # 01:00 01:30 EST, 02:00 02:30 (gap: 03:00 03:30 EDT, same instants as the real ones).
    assert got[:4] == [
        datetime(2025, 3, 9, 6, 0, tzinfo=UTC),
        datetime(2025, 3, 9, 6, 30, tzinfo=UTC),
        datetime(2025, 3, 9, 7, 0, tzinfo=UTC),
        datetime(2025, 3, 9, 7, 30, tzinfo=UTC),
    ]


def test_payroll_15th_and_last_day_rolled_back_to_german_business_day() -> None:
    cal = parse_calendar(
        rrule="FREQ=MONTHLY;BYMONTHDAY=15,-1",
        dtstart="2029-01-15T09:00",
        zone=BERLIN,
        holidays="DE-BE",
        roll="backward",
    )
    got = _instants(cal, BERLIN, datetime(2029, 1, 1, tzinfo=UTC), 8)
    assert [i.astimezone(BERLIN).date() for i in got] == [
        date(2029, 1, 15),
        date(2029, 1, 31),
        date(2029, 2, 15),
        date(2029, 2, 28),
        date(2029, 3, 15),
        date(2029, 3, 29),  # the 31st is a Saturday, the 30th Good Friday
        date(2029, 4, 13),  # the 15th is a Sunday
        date(2029, 4, 30),
    ]
    assert {i.astimezone(BERLIN).hour for i in got} == {9}


def test_every_weekday_except_public_holidays_skips_them() -> None:
    cal = parse_calendar(
        rrule="FREQ=DAILY;BYDAY=MO,TU,WE,TH,FR",
        dtstart="2027-12-20T09:00",
        zone=BERLIN,
        holidays="DE",
    )
    got = _instants(cal, BERLIN, datetime(2027, 12, 19, tzinfo=UTC), 6)
    days = [i.astimezone(BERLIN).date().day for i in got]
    assert days == [20, 21, 22, 23, 24, 27]  # 24 Dec is no public holiday; 25-26 fall on Sat-Sun
    friday_saturday = parse_calendar(
        rrule="FREQ=DAILY", dtstart="2027-01-04T09:00", zone=BERLIN, weekend="fri,sat", roll="skip"
    )
    got = _instants(friday_saturday, BERLIN, datetime(2027, 1, 4, tzinfo=UTC), 5)
    assert [i.astimezone(BERLIN).strftime("%a") for i in got] == ["Mon", "Tue", "Wed", "Thu", "Sun"]


def test_own_holiday_dates_roll_forward() -> None:
    cal = parse_calendar(
        rrule="FREQ=MONTHLY;BYMONTHDAY=1;COUNT=2",
        dtstart="2027-02-01T09:00",
        zone=BERLIN,
        holiday_dates=["2027-03-01", "2027-03-02"],
        roll="forward",
    )
    got = _instants(cal, BERLIN, datetime(2027, 1, 1, tzinfo=UTC), 5)
    assert [i.astimezone(BERLIN).date() for i in got] == [date(2027, 2, 1), date(2027, 3, 3)]


def test_skipping_every_occurrence_is_refused_naming_roll() -> None:
    # Weekends only, every weekend a non-business day: nothing would ever fire, and a lookup
    # would walk the calendar for ever.
    with pytest.raises(InvalidInput) as refused:
        parse_calendar(
            rrule="FREQ=WEEKLY;BYDAY=SA,SU",
            dtstart="2027-01-02T09:00",
            zone=BERLIN,
            roll="skip",
        )
    assert refused.value.field == "roll"


def test_a_lookup_past_the_last_business_day_ends() -> None:
    # The rule's own days all fall on the weekend; two added weekdays fire. Past them the
    # lookup ends instead of walking weekends for ever.
    cal = parse_calendar(
        rrule="FREQ=WEEKLY;BYDAY=SA,SU",
        dtstart="2027-01-02T09:00",
        zone=BERLIN,
        rdates=["2027-01-04T09:00", "2027-01-05T09:00"],
        roll="skip",
    )
    got = _instants(cal, BERLIN, datetime(2027, 1, 1, tzinfo=UTC), 10)
    assert [i.astimezone(BERLIN).date() for i in got] == [date(2027, 1, 4), date(2027, 1, 5)]


@pytest.mark.parametrize(
    ("feb29", "common"),
    [("feb28", date(2029, 2, 28)), ("mar1", date(2029, 3, 1)), ("skip", None)],
)
def test_leap_day_anniversary_in_common_years(feb29: str, common: date | None) -> None:
    cal = parse_calendar(rrule="FREQ=YEARLY", dtstart="2028-02-29T09:00", zone=BERLIN, feb29=feb29)
    got = _instants(cal, BERLIN, datetime(2028, 3, 1, tzinfo=UTC), 4)
    days = [i.astimezone(BERLIN).date() for i in got]
    if common is None:
        assert days[0] == date(2032, 2, 29)
    else:
        assert days[0] == common
        assert date(2032, 2, 29) in days


def test_rdates_add_and_exdates_remove() -> None:
    cal = parse_calendar(
        rrule="FREQ=WEEKLY;COUNT=3",
        dtstart="2027-01-04T09:00",
        zone=BERLIN,
        exdates=["2027-01-11T09:00"],
        rdates=["2027-01-05T12:00"],
    )
    got = _instants(cal, BERLIN, datetime(2027, 1, 1, tzinfo=UTC), 10)
    assert [i.astimezone(BERLIN).replace(tzinfo=None) for i in got] == [
        datetime(2027, 1, 4, 9),
        datetime(2027, 1, 5, 12),
        datetime(2027, 1, 18, 9),
    ]


def test_calendar_round_trips_through_its_stored_text() -> None:
    cal = parse_calendar(
        rrule="RRULE:freq=monthly;byday=MO,TU,WE,TH,FR;bysetpos=-1",
        dtstart="2027-01-29T17:00",
        zone=BERLIN,
        holidays="de-be",
        roll="backward",
        exdates=["2027-03-31T17:00"],
    )
    assert cal.rrule == "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1"
    assert cal.holidays == "DE-BE"
    assert Calendar.from_text(cal.to_text()) == cal


def test_stored_text_leaves_defaults_out_and_reads_the_full_form_too() -> None:
    cal = parse_calendar(rrule="FREQ=WEEKLY;BYDAY=MO,FR", dtstart="2027-01-04T09:00", zone=BERLIN)
    assert cal.to_text() == '{"dtstart":"2027-01-04T09:00:00","rrule":"FREQ=WEEKLY;BYDAY=MO,FR"}'
    assert Calendar.from_text(cal.to_text()) == cal
    full = json.dumps(cal.to_dict(), separators=(",", ":"), sort_keys=True)  # as rows once were
    assert Calendar.from_text(full) == cal
    gulf = parse_calendar(
        rrule="FREQ=MONTHLY",
        dtstart="2027-01-15T09:00",
        zone=BERLIN,
        weekend="fri,sat",
        roll="forward",
    )
    assert json.loads(gulf.to_text())["weekend"] == ["fri", "sat"]
    assert Calendar.from_text(gulf.to_text()) == gulf


# Every BYxxx part's range, each on a FREQ that takes the part: a clear error naming it.
OUT_OF_RANGE = [
    ("FREQ=SECONDLY;BYSECOND=60", "BYSECOND"),  # a leap second: no clock here shows one
    ("FREQ=MINUTELY;BYSECOND=60", "BYSECOND"),
    ("FREQ=DAILY;BYSECOND=0,59,60", "BYSECOND"),
    ("FREQ=DAILY;BYSECOND=61", "BYSECOND"),
    ("FREQ=DAILY;BYSECOND=-1", "BYSECOND"),
    ("FREQ=DAILY;BYMINUTE=60", "BYMINUTE"),
    ("FREQ=DAILY;BYMINUTE=-5", "BYMINUTE"),
    ("FREQ=DAILY;BYHOUR=24", "BYHOUR"),
    ("FREQ=HOURLY;BYHOUR=-1", "BYHOUR"),
    ("FREQ=MONTHLY;BYMONTHDAY=0", "BYMONTHDAY"),
    ("FREQ=MONTHLY;BYMONTHDAY=-32", "BYMONTHDAY"),
    ("FREQ=YEARLY;BYYEARDAY=0", "BYYEARDAY"),
    ("FREQ=YEARLY;BYYEARDAY=367", "BYYEARDAY"),
    ("FREQ=YEARLY;BYYEARDAY=-367", "BYYEARDAY"),
    ("FREQ=YEARLY;BYWEEKNO=0", "BYWEEKNO"),
    ("FREQ=YEARLY;BYWEEKNO=54", "BYWEEKNO"),
    ("FREQ=YEARLY;BYWEEKNO=-54", "BYWEEKNO"),
    ("FREQ=YEARLY;BYMONTH=0", "BYMONTH"),
    ("FREQ=YEARLY;BYMONTH=13", "BYMONTH"),
    ("FREQ=YEARLY;BYMONTH=-1", "BYMONTH"),
    ("FREQ=YEARLY;BYDAY=0MO", "BYDAY"),
    ("FREQ=YEARLY;BYDAY=54MO", "BYDAY"),
    ("FREQ=MONTHLY;BYDAY=6MO", "BYDAY"),
    ("FREQ=MONTHLY;BYDAY=MO;BYSETPOS=0", "BYSETPOS"),
    ("FREQ=MONTHLY;BYDAY=MO;BYSETPOS=367", "BYSETPOS"),
    ("FREQ=MONTHLY;BYDAY=MO;BYSETPOS=-367", "BYSETPOS"),
]


@pytest.mark.parametrize(("rule", "part"), OUT_OF_RANGE)
def test_each_part_out_of_range_is_refused_naming_it(rule: str, part: str) -> None:
    with pytest.raises(InvalidRrule) as caught:
        parse_calendar(rrule=rule, dtstart="2027-01-01T09:00", zone=NEW_YORK)
    assert caught.value.field == "rrule"
    assert caught.value.message.startswith(f"rrule: {part}: ")


_NUMBER_PARTS = {
    "BYSECOND": ("SECONDLY", "MINUTELY", "DAILY"),
    "BYMINUTE": ("MINUTELY", "HOURLY", "WEEKLY"),
    "BYHOUR": ("HOURLY", "DAILY", "MONTHLY"),
    "BYMONTHDAY": ("DAILY", "MONTHLY", "YEARLY"),
    "BYYEARDAY": ("SECONDLY", "HOURLY", "YEARLY"),
    "BYWEEKNO": ("YEARLY",),
    "BYMONTH": ("MINUTELY", "WEEKLY", "YEARLY"),
}


@settings(max_examples=300, deadline=None)
@given(
    part=st.sampled_from(sorted(_NUMBER_PARTS)),
    pick=st.integers(0, 2),
    value=st.integers(-400, 400),
    setpos=st.one_of(st.none(), st.integers(-400, 400)),
)
def test_any_number_in_a_part_is_kept_or_refused_naming_a_part(
    part: str, pick: int, value: int, setpos: int | None
) -> None:
    """Never a crash from the expansion: an InvalidRrule naming a part, or a working rule."""
    freqs = _NUMBER_PARTS[part]
    rule = f"FREQ={freqs[pick % len(freqs)]};{part}={value}"
    if setpos is not None:
        rule += f";BYSETPOS={setpos}"
    refused: InvalidRrule | None = None
    try:
        cal = parse_calendar(rrule=rule, dtstart="2027-01-01T09:00:00", zone=NEW_YORK)
    except InvalidRrule as caught:
        refused = caught
    if refused is not None:
        assert refused.field == "rrule"
        assert refused.message.split(": ")[1].startswith(("BYSETPOS", part, "FREQ="))
        return
    assert next(calendar_instants(cal, NEW_YORK, datetime(2026, 12, 31, tzinfo=UTC))) is not None
