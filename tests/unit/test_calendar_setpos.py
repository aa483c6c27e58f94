"""BYSETPOS picks from a whole period, DTSTART's own period too (RFC 5545 section 3.3.10: "a set
of recurrence instances starts at the beginning of the interval defined by the FREQ rule part").

The picks of the first period that fall before DTSTART neither fire nor count towards COUNT, as
libical computes them. The cases below are libical's recurrence test data (rule, DTSTART and
the instances it lists), each with the sets worked out by hand; a property test checks weekly,
monthly and yearly rules against a plain expansion of whole periods that shares no code with the
product.
"""

from __future__ import annotations

import calendar as calendar_module
from datetime import UTC, date, datetime, time, timedelta
from itertools import islice

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from duetime.errors import InvalidRrule
from duetime.timemath.recurrence.budget import ExpansionBudget, spending
from duetime.timemath.recurrence.calendar import calendar_instants, parse_calendar, rule_walls
from duetime.timemath.tzmath import load_zone

UTC_ZONE = load_zone("UTC")
BERLIN = load_zone("Europe/Berlin")
DAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")


def _walls(rule: str, dtstart: str, take: int = 20) -> list[str]:
    cal = parse_calendar(rrule=rule, dtstart=dtstart, zone=UTC_ZONE)
    return [wall.strftime("%Y%m%dT%H%M%S") for wall in islice(rule_walls(cal), take)]


# (rule, DTSTART, the instances libical lists). The sets, worked out:
LIBICAL = [
    pytest.param(
        "FREQ=WEEKLY;BYDAY=MO,TU,SU,SA,TH;BYSETPOS=3,2;COUNT=4",
        "2024-01-02T12:00",  # a Tuesday
        # Week of Mon 1 Jan: Mon 1, Tue 2, Thu 4, Sat 6, Sun 7 -> 2nd, 3rd = Tue 2, Thu 4.
        # Week of Mon 8 Jan: Mon 8, Tue 9, Thu 11, ... -> Tue 9, Thu 11.
        "20240102T120000,20240104T120000,20240109T120000,20240111T120000",
        id="weekly-from-a-tuesday",
    ),
    pytest.param(
        "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=1,3;COUNT=3",
        "2024-10-23T00:00",  # a Wednesday
        # Week of Mon 21 Oct: 1st = Mon 21 (before DTSTART: dropped), 3rd = Wed 23.
        # Week of Mon 28 Oct: Mon 28, Wed 30.
        "20241023T000000,20241028T000000,20241030T000000",
        id="weekly-monday-and-wednesday",
    ),
    pytest.param(
        "FREQ=YEARLY;BYMONTH=1,2,3,4,5,6,7,8,9,10,11,12;BYMONTHDAY=29;BYSETPOS=3,2;COUNT=4",
        "2024-02-29T12:00",
        # 2024 (leap): Jan 29, Feb 29, Mar 29, ... -> Feb 29, Mar 29.
        # 2025: Jan 29, Mar 29, Apr 29, ... -> Mar 29, Apr 29.
        "20240229T120000,20240329T120000,20250329T120000,20250429T120000",
        id="yearly-29th-of-each-month",
    ),
    pytest.param(
        "FREQ=YEARLY;BYMONTH=1,2,3;BYMONTHDAY=29;BYSETPOS=3,2;COUNT=4",
        "2024-02-29T12:00",
        # 2024: Jan 29, Feb 29, Mar 29 -> Feb 29, Mar 29. 2025, 2026: Jan 29, Mar 29 -> Mar 29.
        "20240229T120000,20240329T120000,20250329T120000,20260329T120000",
        id="yearly-29th-no-third-in-common-years",
    ),
    pytest.param(
        "FREQ=YEARLY;BYYEARDAY=1,2,3,4,5,6,7;BYSETPOS=3,2;COUNT=4",
        "2024-01-03T00:00",
        # 2024: 2nd = Jan 2 (before DTSTART: dropped, not counted), 3rd = Jan 3.
        "20240103T000000,20250102T000000,20250103T000000,20260102T000000",
        id="yearly-days-setpos-out-of-order",
    ),
    pytest.param(
        "FREQ=MONTHLY;BYMINUTE=12,39;BYHOUR=8,14,15;BYDAY=1MO,1TU,2SA,3MO;"
        "BYSETPOS=1,-5,3,-21,4,-8;COUNT=15",
        "2024-01-02T14:39",
        # January: Mon 1, Tue 2, Sat 13, Mon 15, six times each: 24 in all. Positions 1, 3, 4
        # (and -21 = 4) are on Mon 1, before DTSTART: dropped, not counted; -8 = 17th = Sat 13
        # 15:12; -5 = 20th = Mon 15 08:39. Then 5 a month.
        "20240113T151200,20240115T083900,20240205T081200,20240205T141200,20240205T143900,"
        "20240210T151200,20240219T083900,20240304T081200,20240304T141200,20240304T143900,"
        "20240309T151200,20240318T083900,20240401T081200,20240401T141200,20240401T143900",
        id="monthly-after-the-first-picks",
    ),
    pytest.param(
        "FREQ=MONTHLY;BYMONTHDAY=1,2,3,4,5,6,7,8,9,10;BYSETPOS=1,2,-1,-2;COUNT=6",
        "2025-08-10T00:00",
        # August: 1, 2, 9, 10 picked; only the 10th is on or after DTSTART.
        "20250810T000000,20250901T000000,20250902T000000,20250909T000000,20250910T000000,"
        "20251001T000000",
        id="monthly-first-two-and-last-two",
    ),
    pytest.param(
        "FREQ=HOURLY;BYMINUTE=0,10,20,30,40,50;BYSETPOS=-2,3;INTERVAL=2;COUNT=5",
        "2024-10-23T15:40",
        # 15:00's set: :00 ... :50; 3rd = :20 (before DTSTART), -2nd = :40. Every other hour.
        "20241023T154000,20241023T172000,20241023T174000,20241023T192000,20241023T194000",
        id="hourly-every-other-hour",
    ),
    pytest.param(
        "FREQ=MINUTELY;BYSECOND=0,10,20,30,40,50;BYSETPOS=-2,3;INTERVAL=2;COUNT=5",
        "2024-10-23T00:15:40",
        "20241023T001540,20241023T001720,20241023T001740,20241023T001920,20241023T001940",
        id="minutely-every-other-minute",
    ),
    pytest.param(
        "FREQ=DAILY;BYMINUTE=0,10,20,30,40,50;BYSETPOS=-2,3;INTERVAL=5;COUNT=5",
        "2024-10-23T15:40",
        # BYHOUR defaults to DTSTART's: the day's set is 15:00 ... 15:50.
        "20241023T154000,20241028T152000,20241028T154000,20241102T152000,20241102T154000",
        id="daily-every-fifth-day",
    ),
    pytest.param(
        "FREQ=HOURLY;BYHOUR=3,6;BYMINUTE=5,15,25;INTERVAL=7;BYSETPOS=1,-1;COUNT=4",
        "2025-01-01T03:05",
        # Every 7 hours from 03:00 on 1 Jan meets 03:00 or 06:00 again at 06:00 on 7 Jan.
        "20250101T030500,20250101T032500,20250107T060500,20250107T062500",
        id="hourly-interval-meets-byhour",
    ),
]


@pytest.mark.parametrize(("rule", "dtstart", "instances"), LIBICAL)
def test_libical_recurrence_data(rule: str, dtstart: str, instances: str) -> None:
    assert _walls(rule, dtstart) == instances.split(",")


@pytest.mark.parametrize(
    ("wkst", "expected"),
    [
        # Sunday 10 Nov 2024. The week holding it, from WKST, and its set of Mo/Tu/We:
        # WKST=WE: Wed 6 .. Tue 12 -> We 6, Mo 11, Tu 12: 1st = 6 (before DTSTART, dropped);
        #          then We 13, We 20.
        ("WE", ["2024-11-13", "2024-11-20", "2024-11-27"]),
        # WKST=MO: Mon 4 .. Sun 10 -> Mo 4 (dropped); then Mo 11, Mo 18, Mo 25.
        ("MO", ["2024-11-11", "2024-11-18", "2024-11-25"]),
        # WKST=SU: Sun 10 .. Sat 16: the week starts at DTSTART -> Mo 11, ...
        ("SU", ["2024-11-11", "2024-11-18", "2024-11-25"]),
        # WKST=TU: Tue 5 .. Mon 11 -> Tu 5, We 6, Mo 11: 1st = Tu 5 (dropped); then Tu 12, 19.
        ("TU", ["2024-11-12", "2024-11-19", "2024-11-26"]),
    ],
)
def test_the_first_week_begins_on_wkst_before_dtstart(wkst: str, expected: list[str]) -> None:
    cal = parse_calendar(
        rrule=f"FREQ=WEEKLY;WKST={wkst};BYSETPOS=1;BYDAY=MO,TU,WE;COUNT=3",
        dtstart="2024-11-10T09:00",
        zone=BERLIN,
    )
    got = list(calendar_instants(cal, BERLIN, datetime(2024, 11, 1, tzinfo=UTC)))
    assert [i.astimezone(BERLIN).date().isoformat() for i in got] == expected
    assert {i.astimezone(BERLIN).hour for i in got} == {9}


def test_the_next_occurrence_asked_inside_the_first_week() -> None:
    # "The last weekday of each week" from a Wednesday: Friday, not the Wednesday before it.
    cal = parse_calendar(
        rrule="FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1",
        dtstart="2027-01-06T17:00",
        zone=BERLIN,
    )
    after = datetime(2027, 1, 6, 12, tzinfo=UTC)
    got = list(islice(calendar_instants(cal, BERLIN, after), 2))
    assert [i.astimezone(BERLIN).date().isoformat() for i in got] == ["2027-01-08", "2027-01-15"]
    first_pick = parse_calendar(
        rrule="FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=1",
        dtstart="2027-01-06T17:00",
        zone=BERLIN,
    )
    got = list(islice(calendar_instants(first_pick, BERLIN, after), 2))
    # The week's first weekday is Monday 4 January, before DTSTART: the first is 11 January.
    assert [i.astimezone(BERLIN).date().isoformat() for i in got] == ["2027-01-11", "2027-01-18"]


def test_a_rule_whose_only_pick_is_before_dtstart_within_until_is_refused() -> None:
    # Monday of the week holding Wednesday 6 January, until that Sunday: no occurrence at all.
    with pytest.raises(InvalidRrule) as caught:
        parse_calendar(
            rrule="FREQ=WEEKLY;BYDAY=MO,FR;BYSETPOS=1;UNTIL=20270110",
            dtstart="2027-01-06T17:00",
            zone=BERLIN,
        )
    assert caught.value.field == "rrule"


# An expansion of whole periods, written from the RFC's words alone.


def _period_days(freq: str, first: date, index: int, interval: int, wkst: int) -> list[date]:
    if freq == "WEEKLY":
        monday = first - timedelta(days=(first.weekday() - wkst) % 7)
        start = monday + timedelta(weeks=index * interval)
        return [start + timedelta(days=n) for n in range(7)]
    if freq == "YEARLY":
        year = first.year + index * interval
        return [
            date(year, 1, 1) + timedelta(days=n)
            for n in range(366 if calendar_module.isleap(year) else 365)
        ]
    month = first.year * 12 + first.month - 1 + index * interval
    year, month = divmod(month, 12)
    length = calendar_module.monthrange(year, month + 1)[1]
    return [date(year, month + 1, day) for day in range(1, length + 1)]


def _expected(
    freq: str,
    start: datetime,
    interval: int,
    weekdays: set[int],
    monthdays: set[int],
    hours: list[int],
    positions: list[int],
    wkst: int,
    count: int,
) -> list[datetime]:
    found: list[datetime] = []
    for index in range(400):
        days = _period_days(freq, start.date(), index, interval, wkst)
        matching = []
        for day in days:
            if weekdays and day.weekday() not in weekdays:
                continue
            length = calendar_module.monthrange(day.year, day.month)[1]
            if monthdays and not {day.day, day.day - length - 1} & monthdays:
                continue
            matching.append(day)
        times = [time(h, start.minute, start.second) for h in hours]
        period_set = [datetime.combine(day, t) for day in matching for t in times]
        picks = sorted(
            {period_set[p - 1 if p > 0 else p] for p in positions if abs(p) <= len(period_set)}
        )
        found.extend(wall for wall in picks if wall >= start)
        if len(found) >= count:
            return found[:count]
    return found


@settings(max_examples=150, deadline=None)
@given(
    freq=st.sampled_from(("WEEKLY", "MONTHLY", "YEARLY")),
    interval=st.integers(1, 3),
    weekdays=st.sets(st.integers(0, 6), min_size=1, max_size=6),
    monthdays=st.sets(st.sampled_from((1, 2, 3, 10, 15, 28, 29, 30, 31, -1, -2)), max_size=4),
    hours=st.sets(st.integers(0, 23), max_size=3),
    positions=st.sets(st.sampled_from((1, 2, 3, 4, -1, -2, -3)), min_size=1, max_size=3),
    wkst=st.integers(0, 6),
    start=st.datetimes(datetime(2020, 1, 1), datetime(2030, 12, 31)).map(
        lambda d: d.replace(second=0, microsecond=0)
    ),
)
def test_setpos_agrees_with_whole_periods_from_the_rfc_wording(
    freq: str,
    interval: int,
    weekdays: set[int],
    monthdays: set[int],
    hours: set[int],
    positions: set[int],
    wkst: int,
    start: datetime,
) -> None:
    monthdays = monthdays if freq != "WEEKLY" else set()
    parts = [f"FREQ={freq}", f"INTERVAL={interval}", f"WKST={DAYS[wkst]}", "COUNT=12"]
    parts.append("BYDAY=" + ",".join(DAYS[d] for d in sorted(weekdays)))
    if monthdays:
        parts.append("BYMONTHDAY=" + ",".join(map(str, sorted(monthdays))))
    if hours:
        parts.append("BYHOUR=" + ",".join(map(str, sorted(hours))))
    parts.append("BYSETPOS=" + ",".join(map(str, sorted(positions))))
    rule = ";".join(parts)
    expected = _expected(
        freq,
        start,
        interval,
        weekdays,
        monthdays,
        sorted(hours) or [start.hour],
        sorted(positions),
        wkst,
        12,
    )
    try:
        cal = parse_calendar(rrule=rule, dtstart=start.isoformat(), zone=UTC_ZONE)
    except InvalidRrule:
        assert expected == []  # no month has such a day: refused
        return
    assume(len(expected) == 12)  # found within 400 periods
    assert list(rule_walls(cal)) == expected


@pytest.mark.parametrize(
    "rule",
    [
        "FREQ=YEARLY;BYYEARDAY=365;BYSETPOS=366",  # one day a year: one time to pick from
        "FREQ=YEARLY;BYMONTHDAY=1,2;BYMONTH=2;BYSETPOS=-3",
        "FREQ=MONTHLY;BYHOUR=9,17;BYMONTHDAY=1;BYSETPOS=3",
        "FREQ=WEEKLY;BYDAY=MO;BYSETPOS=2",
    ],
)
def test_a_pick_beyond_what_a_period_can_hold_is_refused_as_never_firing(rule: str) -> None:
    # Decided from the parts, not by walking centuries of periods that never hold it (which
    # would run out of an expansion's budget before it could say the rule is empty).
    with pytest.raises(InvalidRrule) as caught:
        parse_calendar(rrule=rule, dtstart="2027-01-01T09:00", zone=load_zone("UTC"))
    assert caught.value.message == f"rrule: {rule}: no occurrence within 100 years of DTSTART"


def test_a_pick_within_what_a_period_can_hold_is_kept() -> None:
    cal = parse_calendar(
        rrule="FREQ=MONTHLY;BYMONTHDAY=1;BYHOUR=9,17;BYSETPOS=2",
        dtstart="2027-01-01T09:00",
        zone=load_zone("UTC"),
    )
    assert list(islice(rule_walls(cal), 2)) == [
        datetime(2027, 1, 1, 17),
        datetime(2027, 2, 1, 17),
    ]


def test_the_expansion_of_a_whole_first_period_spends_from_the_budget() -> None:
    # The first period begins on 1 January, before DTSTART: its 365 days are tested too.
    cal = parse_calendar(
        rrule="FREQ=YEARLY;BYMONTH=12;BYMONTHDAY=31;BYSETPOS=1",
        dtstart="2027-06-01T09:00",
        zone=load_zone("UTC"),
    )
    budget = ExpansionBudget(steps=10**9, cpu_seconds=None)
    with spending(budget):
        assert next(rule_walls(cal)) == datetime(2027, 12, 31, 9)
    assert budget.spent >= 365 // 4
