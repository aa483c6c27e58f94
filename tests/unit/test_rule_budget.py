"""Every expansion of a rule is bounded in work: costly rules are refused, naming the part.

Each shape below took seconds to minutes of CPU (a SECONDLY rule walked second by second) before
expansions had a budget; the timeout makes such a regression fail fast instead of hanging.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from duetime.errors import InvalidInput, RuleTooCostly
from duetime.timemath.recurrence import next_after, occurrences, parse_recurrence
from duetime.timemath.recurrence.budget import MAX_STEPS, ExpansionBudget
from duetime.timemath.recurrence.calendar import Calendar
from duetime.timemath.recurrence.occurrences import budget_for
from duetime.timemath.recurrence.rule import Recurrence
from duetime.timemath.recurrence.skips import MAX_DROPPED

NOW = datetime(2026, 12, 7, 12, tzinfo=UTC)
FEB29 = "FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=29;BYHOUR=23"

# Minutes, not seconds: the property test below expands 120 rules twice each (some 4 s of CPU
# quiet, 13 s at a load of 13, and past 20 s on a machine busier still); a regression hangs far
# longer than this, and the budget's own count is what bounds the work.
pytestmark = pytest.mark.timeout(120)


def _rrule(rule: str, dtstart: str, **calendar: object) -> Recurrence:
    return parse_recurrence(
        rrule=rule, timezone="Europe/Berlin", now=NOW, calendar={"dtstart": dtstart, **calendar}
    )


def test_a_per_second_count_from_long_ago_is_refused_naming_count() -> None:
    with pytest.raises(RuleTooCostly) as caught:
        _rrule("FREQ=SECONDLY;COUNT=999999999", "2026-11-30T00:00")
    assert caught.value.field == "rrule"
    assert caught.value.part == "COUNT"
    assert caught.value.message.startswith("rrule: COUNT: ")


def test_a_count_whose_every_occurrence_fits_the_budget_is_accepted() -> None:
    rule = _rrule("FREQ=MINUTELY;COUNT=1000", "2026-12-01T00:00")
    assert occurrences(rule, NOW, 3) == []  # all 1000 minutes are over by NOW
    assert len(occurrences(rule, datetime(2026, 11, 1, tzinfo=UTC), 2000)) == 1000


@pytest.mark.parametrize("dtstart", ["2026-01-01T00:00", "2097-01-01T00:00"])
def test_a_per_second_rule_on_29_february_is_refused_naming_its_day(dtstart: str) -> None:
    with pytest.raises(RuleTooCostly) as caught:
        _rrule(FEB29 + ";BYMINUTE=59", dtstart)
    assert caught.value.part == "BYMONTHDAY"


def test_a_stored_costly_rule_is_refused_on_expansion_instead_of_running_on() -> None:
    # Written before rules had a budget: it reads back unchecked, and each expansion stops.
    calendar = Calendar.from_text(f'{{"rrule":"{FEB29}","dtstart":"2026-01-01T00:00:00"}}')
    rule = Recurrence(None, None, "UTC", calendar=calendar)
    with pytest.raises(RuleTooCostly, match="BYMONTHDAY"):
        next_after(rule, NOW)
    with pytest.raises(RuleTooCostly):
        occurrences(rule, NOW, 5)


def test_skipping_up_to_the_drops_allowed_fits_the_budget_and_more_is_refused_naming_roll() -> None:
    # One business day a week and a rule every minute: 8,640 minutes dropped in a row, fewer
    # than a lookup may drop (MAX_DROPPED). Accepted, and found past them within its budget.
    closed = "mon,tue,wed,thu,fri,sat"
    assert MAX_DROPPED >= 6 * 1440
    rule = _rrule("FREQ=MINUTELY", "2026-12-07T00:00", weekend=closed, roll="skip")
    monday = datetime(2026, 12, 13, 23, tzinfo=UTC)  # Monday 00:00 in Berlin
    budget = budget_for(rule)
    assert next_after(rule, monday, budget=budget) == datetime(2026, 12, 19, 23, tzinfo=UTC)
    assert budget.spent > MAX_STEPS  # the drops took more than an ordinary budget
    # Every 30 seconds drops 17,280 in a row: a lookup would stop there, so it is refused.
    with pytest.raises(InvalidInput) as caught:
        _rrule("FREQ=SECONDLY;INTERVAL=30", "2026-12-07T00:00", weekend=closed, roll="skip")
    assert caught.value.field == "roll"
    assert "more than 10,000 occurrences" in caught.value.message
    # Every hour is fine: a week of hours is cheap.
    _rrule("FREQ=HOURLY", "2026-12-07T00:00", weekend=closed, roll="skip")


def test_a_cron_expansion_spends_from_its_budget() -> None:
    rule = parse_recurrence(cron="* * * * *", timezone="America/New_York", now=NOW)
    with pytest.raises(RuleTooCostly) as caught:
        occurrences(rule, NOW, 100, budget=ExpansionBudget(steps=200, field="cron", part=""))
    assert caught.value.field == "cron"
    assert len(occurrences(rule, NOW, 100)) == 100


def test_the_cpu_guard_reads_the_injected_clock() -> None:
    ticks = itertools.count(0.0, 0.001)  # every reading a millisecond later
    budget = ExpansionBudget(steps=10**9, cpu_seconds=0.002, clock=lambda: next(ticks))
    rule = _rrule("FREQ=SECONDLY", "2026-12-07T00:00")
    with pytest.raises(RuleTooCostly, match="of CPU"):
        occurrences(rule, NOW, 100_000, budget=budget)


def test_the_refusal_is_bad_input_so_the_api_answers_422() -> None:
    assert issubclass(RuleTooCostly, InvalidInput)
    assert RuleTooCostly("rrule", "COUNT", "x").code == "rule_too_costly"


FREQS = ("SECONDLY", "MINUTELY", "HOURLY", "DAILY", "WEEKLY", "MONTHLY", "YEARLY")


@st.composite
def rules(draw: st.DrawFn) -> str:
    """RRULEs of every frequency with the parts that make expansions long: sparse days under
    a sub-daily frequency, narrow times, large intervals, COUNT, BYSETPOS."""
    freq = draw(st.sampled_from(FREQS))
    parts = [f"FREQ={freq}"]
    if draw(st.booleans()):
        parts.append(f"INTERVAL={draw(st.sampled_from((2, 3, 7, 13, 59, 61, 3601, 86399)))}")
    if draw(st.integers(0, 3)) == 0:
        parts.append(f"COUNT={draw(st.sampled_from((1, 10, 1000, 100_000, 999_999_999)))}")
    if draw(st.booleans()):
        parts.append(f"BYMONTH={draw(st.sampled_from(('2', '1,7', '12')))}")
    if freq != "WEEKLY" and draw(st.booleans()):
        parts.append(f"BYMONTHDAY={draw(st.sampled_from(('29', '1', '-1', '13,31')))}")
    if draw(st.booleans()):
        parts.append(f"BYDAY={draw(st.sampled_from(('MO', 'SA,SU', 'FR')))}")
    for part, values in (("BYHOUR", ("23", "0,12")), ("BYMINUTE", ("59", "0,30"))):
        if draw(st.integers(0, 2)) == 0:
            parts.append(f"{part}={draw(st.sampled_from(values))}")
    if freq in ("MONTHLY", "YEARLY") and draw(st.integers(0, 3)) == 0:
        parts.append(f"BYSETPOS={draw(st.sampled_from(('1', '-1', '3')))}")
    return ";".join(parts)


@settings(max_examples=120, deadline=None)
@given(
    rules(),
    st.datetimes(datetime(1990, 1, 1), datetime(2099, 12, 31)).map(
        lambda d: d.replace(microsecond=0)
    ),
    st.sampled_from(("UTC", "America/New_York", "Australia/Lord_Howe")),
    st.datetimes(datetime(2020, 1, 1), datetime(2040, 12, 31)).map(lambda d: d.replace(tzinfo=UTC)),
)
def test_every_accepted_rule_previews_100_occurrences_within_the_budget(
    rule: str, dtstart: datetime, zone: str, after: datetime
) -> None:
    """The budget's steps stand for CPU time (about a microsecond each, so MAX_STEPS is some
    50 ms): counting them is the bound on work, without asserting on a machine's speed."""
    try:
        rec = parse_recurrence(
            rrule=rule, timezone=zone, now=after, calendar={"dtstart": dtstart.isoformat()}
        )
    except InvalidInput:
        return
    first = dtstart.replace(tzinfo=UTC) - timedelta(days=2)
    # From DTSTART and from the moment it was made. (From elsewhere a rule may cost more, a
    # per-second rule on the 29th in February: such an expansion is refused by its budget.)
    for since in (first, after):
        budget = ExpansionBudget(cpu_seconds=None)
        try:
            occurrences(rec, since, 100, budget=budget)
        except RuleTooCostly as exc:
            pytest.fail(
                f"{rule} from {dtstart} in {zone}, accepted at {after}: from {since}: {exc}"
            )
        assert budget.spent <= MAX_STEPS


def test_a_yearly_rule_on_29_february_is_accepted_though_its_hundredth_is_far() -> None:
    # 100 occurrences lie four centuries on: the check at creation looks a century ahead.
    rule = _rrule("FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29", "2028-02-29T09:00")
    assert next_after(rule, NOW) == datetime(2028, 2, 29, 8, tzinfo=UTC)


def test_a_rule_firing_once_in_decades_previews_its_century_within_the_budget() -> None:
    """Found by the property above: accepted (its occurrences within a century fit the check at
    creation), its hundredth occurrence lies millennia on; a preview lists the century's."""
    rule = "FREQ=DAILY;INTERVAL=2;BYMONTH=2;BYMONTHDAY=-1;BYDAY=MO;BYHOUR=23"
    made = datetime(2022, 8, 23, 20, 12, 47, tzinfo=UTC)
    rec = parse_recurrence(
        rrule=rule,
        timezone="America/New_York",
        now=made,
        calendar={"dtstart": "2022-08-23T20:12:47"},
    )
    budget = ExpansionBudget(cpu_seconds=None)
    found = occurrences(rec, made - timedelta(days=2), 100, budget=budget)
    assert 0 < len(found) < 100
    assert found[-1] <= made + timedelta(days=366 * 100)
    assert budget.spent <= MAX_STEPS
