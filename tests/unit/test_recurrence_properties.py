"""Properties of recurrences over interesting zones, 2000-2035, most windows around a DST change.

- occurrences strictly increase, never repeat an instant, and do not depend on where we start;
- with default policies a fixed-time job fires exactly once for each wall-clock match
  (at its instant, at its first instant when repeated, right after the gap when skipped);
- a wildcard job fires exactly at the instants whose wall-clock time matches;
- with default policies we equal cronsim (the reference implementation of cronie's rules),
  except inside a clock jump over 3 hours, where cronie stops catching up and cronsim does not;
- policies only add or remove what they say; intervals sit on their grid; catch-up agrees
  with plain enumeration.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

from cronsim import CronSim
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from duetime.timemath.recurrence import (
    CLOCK_JUMP,
    Recurrence,
    catch_up_due,
    next_after,
    occurrences,
    occurrences_between,
    parse_recurrence,
)
from duetime.timemath.tzmath import classify, load_zone, to_utc

ZONES = [
    "UTC",
    "America/New_York",
    "Europe/London",
    "Europe/Dublin",  # negative DST in tzdata
    "Australia/Sydney",
    "Australia/Lord_Howe",  # 30-minute DST
    "Asia/Kathmandu",  # +05:45
    "America/Sao_Paulo",  # DST at midnight until 2019
    "America/St_Johns",  # -03:30, DST at 00:01 until 2011
    "Pacific/Apia",  # skipped 2011-12-30
    "Pacific/Chatham",  # +12:45 / +13:45
    "Antarctica/Troll",  # two-hour DST
    "Africa/Casablanca",  # DST suspended each Ramadan
    "America/Santiago",  # DST at midnight
    "America/Havana",  # DST at midnight/01:00
    "Asia/Tehran",  # DST at midnight until 2022
    "Europe/Moscow",  # permanent offsets changed 2011 and 2014
]
FIRST = datetime(2000, 1, 1, tzinfo=UTC)
LAST = datetime(2035, 12, 31, tzinfo=UTC)

PROPERTIES = settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@dataclass(frozen=True)
class Transition:
    zone: str
    instant: datetime
    jump: timedelta  # positive: a gap; negative: an overlap


def _offset(zone: ZoneInfo, timestamp: int) -> timedelta:
    offset = datetime.fromtimestamp(timestamp, zone).utcoffset()
    assert offset is not None
    return offset


@functools.cache
def transitions(name: str) -> tuple[Transition, ...]:
    """Offset changes of one zone in 2000-2035: a daily scan, then bisection to the second."""
    zone = load_zone(name)
    found = []
    first, last = int(FIRST.timestamp()), int(LAST.timestamp())
    low, low_offset = first, _offset(zone, first)
    for high in range(first + 86400, last, 86400):
        high_offset = _offset(zone, high)
        if high_offset != low_offset:
            a, b = low, high
            while b - a > 1:
                mid = (a + b) // 2
                if _offset(zone, mid) == low_offset:
                    a = mid
                else:
                    b = mid
            found.append(Transition(name, datetime.fromtimestamp(b, UTC), high_offset - low_offset))
        low, low_offset = high, high_offset
    return tuple(found)


@st.composite
def windows(draw: st.DrawFn, hours: int = 30) -> tuple[str, datetime, datetime]:
    """A zone and an (after, until] window, usually around one of its offset changes."""
    name = draw(st.sampled_from(ZONES))
    changes = transitions(name)
    near_a_change = draw(st.integers(0, 4)) > 0  # four times in five
    if changes and near_a_change:
        centre = draw(st.sampled_from(changes)).instant
        centre += timedelta(minutes=draw(st.integers(-hours * 60, hours * 60)))
    else:
        centre = draw(
            st.datetimes(min_value=FIRST.replace(tzinfo=None), max_value=datetime(2035, 6, 1))
        )
        centre = centre.replace(tzinfo=UTC)
    after = centre - timedelta(hours=hours, seconds=draw(st.integers(0, 3599)))
    return name, after, after + timedelta(hours=2 * hours)


minutes = st.integers(0, 59)
hours = st.integers(0, 23)


@st.composite
def fixed_expressions(draw: st.DrawFn) -> str:
    """Fixed-time jobs: neither minute nor hour starts with '*'."""
    m, h = draw(minutes), draw(hours)
    form = draw(st.integers(0, 4))
    if form == 0:
        return f"{m} {h} * * *"
    if form == 1:
        m2 = draw(minutes.filter(lambda x: x != m))
        return f"{min(m, m2)},{max(m, m2)} {h} * * *"
    if form == 2:
        h2 = draw(hours.filter(lambda x: x != h))
        return f"{m} {min(h, h2)},{max(h, h2)} * * *"
    if form == 3:
        return f"{m} {h}-{min(h + draw(st.integers(1, 3)), 23)} * * *"
    # Biased to the hours where the world changes its clocks.
    return (
        f"{draw(st.sampled_from([0, 15, 30, 45]))} {draw(st.sampled_from([0, 1, 2, 3, 23]))} * * *"
    )


@st.composite
def wildcard_expressions(draw: st.DrawFn) -> str:
    """Wildcard jobs: the minute or the hour field starts with '*'."""
    form = draw(st.integers(0, 3))
    if form == 0:
        return f"*/{draw(st.sampled_from([5, 10, 15, 20, 30, 45]))} * * * *"
    if form == 1:
        return f"{draw(minutes)} * * * *"
    if form == 2:
        return f"{draw(minutes)} */{draw(st.integers(2, 6))} * * *"
    return f"*/{draw(st.sampled_from([7, 15, 30]))} {draw(st.sampled_from([0, 1, 2, 3, 23]))} * * *"


expressions = st.one_of(fixed_expressions(), wildcard_expressions())
gaps = st.sampled_from(["run_after", "skip"])
overlaps = st.sampled_from(["once", "both"])


def build(expr: str, zone: str, on_gap: str = "run_after", on_overlap: str = "once") -> Recurrence:
    return parse_recurrence(
        cron=expr, timezone=zone, on_gap=on_gap, on_overlap=on_overlap, now=FIRST
    )


def wall_matches(expr: str, wall: datetime) -> bool:
    """Does this naive wall-clock minute match? (cronsim as a plain calendar matcher)."""
    return next(CronSim(expr, wall - timedelta(seconds=1))) == wall


@functools.cache
def daily_minutes(expr: str) -> frozenset[tuple[int, int]]:
    """The (hour, minute) pairs an expression with only minute/hour fields matches."""
    assert expr.split()[2:] == ["*", "*", "*"]
    midnight = datetime(2001, 1, 1)
    sim = CronSim(expr, midnight - timedelta(seconds=1))
    found = set()
    while (wall := next(sim)) < midnight + timedelta(days=1):
        found.add((wall.hour, wall.minute))
    return frozenset(found)


# --------------------------------------------------------------------------- properties


@PROPERTIES
@given(window=windows(), expr=expressions, on_gap=gaps, on_overlap=overlaps, data=st.data())
def test_increasing_unique_and_start_independent(
    window: tuple[str, datetime, datetime],
    expr: str,
    on_gap: str,
    on_overlap: str,
    data: st.DataObject,
) -> None:
    zone, after, _ = window
    rec = build(expr, zone, on_gap, on_overlap)
    got = occurrences(rec, after, 30)
    assert len(got) == 30
    assert got[0] > after
    assert all(a < b for a, b in pairwise(got))  # strictly increasing: no instant twice
    assert all(x.tzinfo is UTC for x in got)
    # Asking again from any instant gives the same future: no drift, no double firing.
    i = data.draw(st.integers(0, 28))
    assert next_after(rec, got[i]) == got[i + 1]
    between = got[i] + (got[i + 1] - got[i]) / 2
    assert occurrences(rec, between, 29 - i) == got[i + 1 :]
    assert occurrences(rec, got[i] - timedelta(microseconds=1), 30 - i) == got[i:]


def _first_after_gap(zone: ZoneInfo, wall: datetime) -> datetime:
    """Brute force: the first whole minute on the post-gap offset (tz changes are on minutes)."""
    instant = to_utc(wall, zone, "earlier")
    target = to_utc(wall, zone, "later").astimezone(zone).utcoffset()
    while instant.astimezone(zone).utcoffset() != target:
        instant += timedelta(minutes=1)
    return instant


@PROPERTIES
@given(window=windows(hours=48), m=minutes, hour_set=st.sets(hours, min_size=1, max_size=3))
def test_default_fixed_time_fires_exactly_once_per_wall_clock_match(
    window: tuple[str, datetime, datetime], m: int, hour_set: set[int]
) -> None:
    name, after, until = window
    zone = load_zone(name)
    expr = f"{m} {','.join(str(h) for h in sorted(hour_set))} * * *"
    expected: set[datetime] = set()
    day = after.astimezone(zone).date() - timedelta(days=1)
    while day <= until.astimezone(zone).date() + timedelta(days=1):
        for h in hour_set:
            wall = datetime(day.year, day.month, day.day, h, m)
            kind = classify(wall, zone)
            if kind != "gap":
                expected.add(to_utc(wall, zone, "earlier"))  # the first time it is shown
            elif to_utc(wall, zone, "later") - to_utc(wall, zone, "earlier") <= CLOCK_JUMP:
                expected.add(_first_after_gap(zone, wall))
        day += timedelta(days=1)
    want = sorted(x for x in expected if after < x <= until)
    assert list(occurrences_between(build(expr, name), after, until)) == want


@PROPERTIES
@given(window=windows(hours=12), expr=wildcard_expressions(), on_gap=gaps, on_overlap=overlaps)
def test_wildcard_fires_when_the_wall_clock_matches(
    window: tuple[str, datetime, datetime], expr: str, on_gap: str, on_overlap: str
) -> None:
    name, after, until = window
    zone = load_zone(name)
    want = []
    instant = after.replace(second=0, microsecond=0) + timedelta(minutes=1)
    while instant <= until:
        wall = instant.astimezone(zone)
        if (wall.hour, wall.minute) in daily_minutes(expr):
            want.append(instant)
        instant += timedelta(minutes=1)
    assert list(occurrences_between(build(expr, name, on_gap, on_overlap), after, until)) == want


@PROPERTIES
@given(window=windows(), expr=fixed_expressions())
def test_default_fixed_time_equals_cronsim_except_in_long_jumps(
    window: tuple[str, datetime, datetime], expr: str
) -> None:
    name, after, until = window
    zone = load_zone(name)
    assume(
        not any(
            t.jump > CLOCK_JUMP and after - timedelta(days=2) < t.instant < until
            for t in transitions(name)
        )
    )
    reference = []
    sim = CronSim(expr, after.astimezone(zone))
    while (instant := next(sim).astimezone(UTC)) <= until:
        if instant > after:
            reference.append(instant)
    assert list(occurrences_between(build(expr, name), after, until)) == reference


@PROPERTIES
@given(window=windows(), expr=fixed_expressions())
def test_policies_only_add_or_remove_what_they_say(
    window: tuple[str, datetime, datetime], expr: str
) -> None:
    name, after, until = window
    zone = load_zone(name)

    def fired(on_gap: str, on_overlap: str) -> set[datetime]:
        return set(occurrences_between(build(expr, name, on_gap, on_overlap), after, until))

    default = fired("run_after", "once")
    skipped = fired("skip", "once")
    both = fired("run_after", "both")
    # skip drops exactly the firings that stand in for a skipped wall time.
    assert skipped <= default
    for instant in default - skipped:
        wall = instant.astimezone(zone).replace(tzinfo=None)
        assert not wall_matches(expr, wall) or classify(wall - timedelta(minutes=1), zone) == "gap"
    # both adds only the second pass of repeated wall times that match.
    assert default <= both
    for instant in both - default:
        wall = instant.astimezone(zone).replace(tzinfo=None)
        assert classify(wall, zone) == "overlap"
        assert wall_matches(expr, wall)
        assert to_utc(wall, zone, "later") == instant


@PROPERTIES
@given(
    start=st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2035, 1, 1)),
    step=st.integers(1, 3 * 86400),
    later=st.integers(-86400, 400 * 86400),
    zone=st.sampled_from(ZONES),
)
def test_interval_sits_on_its_grid(start: datetime, step: int, later: int, zone: str) -> None:
    anchor = start.replace(tzinfo=UTC)
    rec = parse_recurrence(every=step, timezone=zone, start_at=anchor)
    after = anchor + timedelta(seconds=later)
    got = occurrences(rec, after, 5)
    every = timedelta(seconds=step)
    assert got[0] > after
    assert got[0] == anchor or got[0] - every <= after
    assert (got[0] - anchor) % every == timedelta(0)
    assert all(b - a == every for a, b in pairwise(got))  # real time, whatever the zone


@PROPERTIES
@given(
    window=windows(hours=24),
    expr=st.one_of(expressions, st.sampled_from(["every:PT17M", "every:PT2H", "every:3600"])),
    policy=st.sampled_from(["latest", "all", "none"]),
    limit=st.integers(1, 50),
)
def test_catch_up_agrees_with_enumeration(
    window: tuple[str, datetime, datetime], expr: str, policy: str, limit: int
) -> None:
    name, last, now = window
    if expr.startswith("every:"):
        rec = parse_recurrence(every=expr.removeprefix("every:"), timezone=name)
    else:
        rec = build(expr, name)
    missed = list(occurrences_between(rec, last, now, anchor=last))
    upcoming = next_after(rec, now, anchor=last)
    due, following = catch_up_due(rec, last, now, policy, limit)  # type: ignore[arg-type]
    if policy == "none":
        assert (due, following) == ([], upcoming)
    elif policy == "latest":
        assert (due, following) == (missed[-1:], upcoming)
    elif len(missed) <= limit:
        assert (due, following) == (missed, upcoming)
    else:
        assert (due, following) == (missed[:limit], missed[limit])
    assert following is None or following > (due[-1] if due else last)
