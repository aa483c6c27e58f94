"""Properties of wall-clock <-> UTC and duration arithmetic over random times in tricky zones.

Random wall times seldom land in a gap or an overlap, so half the examples are drawn from the
transitions themselves, found here independently of duetime by scanning each zone's UTC offsets.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from duetime.errors import AmbiguousLocalTime, NonexistentLocalTime
from duetime.timemath.durations import CalendarDuration, add_duration, add_months
from duetime.timemath.tzmath import classify, load_zone, to_local, to_utc

ZONES = [
    "UTC",
    "America/New_York",
    "Europe/London",
    "Europe/Berlin",
    "Europe/Dublin",  # tzdata models Irish winter time as *negative* DST
    "Australia/Sydney",
    "Australia/Lord_Howe",  # 30-minute DST
    "Asia/Kathmandu",  # +05:45, 15-minute jump in 1986
    "Asia/Kolkata",
    "Asia/Tokyo",
    "America/Sao_Paulo",  # DST at midnight until 2019
    "America/St_Johns",  # -03:30
    "Pacific/Apia",  # skipped 2011-12-30
    "Pacific/Chatham",  # +12:45 / +13:45
    "Pacific/Kiritimati",  # skipped 1994-12-31
    "Antarctica/Troll",  # two-hour DST
    "Africa/Casablanca",  # DST suspended each Ramadan: four transitions a year
    "America/Santiago",
]

FIRST = datetime(1971, 1, 1)
LAST = datetime(2037, 12, 31, 23, 59)
PROPERTY_SETTINGS = settings(
    max_examples=200,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@dataclass(frozen=True)
class Transition:
    """One change of UTC offset: at ``instant`` the offset goes from ``before`` to ``after``."""

    zone: str
    instant: datetime
    before: timedelta
    after: timedelta

    @property
    def jump(self) -> timedelta:
        """Positive: clocks skip forward (a gap). Negative: they go back (an overlap)."""
        return self.after - self.before

    @property
    def window(self) -> tuple[datetime, datetime]:
        """The wall-clock times that are skipped (gap) or repeated (overlap): [start, end)."""
        naive = self.instant.replace(tzinfo=None)
        low, high = sorted((naive + self.before, naive + self.after))
        return low, high


def _offset(zone: ZoneInfo, timestamp: int) -> timedelta:
    offset = datetime.fromtimestamp(timestamp, zone).utcoffset()
    assert offset is not None
    return offset


@functools.cache
def transitions() -> list[Transition]:
    """Every offset change in ZONES between FIRST and LAST: a daily scan, then bisection."""
    found: list[Transition] = []
    first = int(FIRST.replace(tzinfo=UTC).timestamp())
    last = int(LAST.replace(tzinfo=UTC).timestamp())
    for name in ZONES:
        zone = load_zone(name)
        low, low_offset = first, _offset(zone, first)
        for high in range(first + 86400, last + 86400, 86400):
            high_offset = _offset(zone, high)
            if high_offset != low_offset:
                a, b = low, high  # offset(a) is the old one, offset(b) the new one
                while b - a > 1:
                    mid = (a + b) // 2
                    if _offset(zone, mid) == low_offset:
                        a = mid
                    else:
                        b = mid
                instant = datetime.fromtimestamp(b, UTC)
                found.append(Transition(name, instant, low_offset, high_offset))
            low, low_offset = high, high_offset
    return found


def _transitions_of(kind: str) -> list[Transition]:
    wanted = [t for t in transitions() if (t.jump > timedelta(0)) == (kind == "gap")]
    # Windows of two transitions never touch in these zones, but keep the scan honest.
    return [t for t in wanted if t.window[0] >= FIRST + timedelta(days=2)]


zones = st.sampled_from(ZONES).map(load_zone)
walls = st.datetimes(min_value=FIRST, max_value=LAST)
instants = st.datetimes(min_value=FIRST, max_value=LAST).map(lambda d: d.replace(tzinfo=UTC))
disambiguations = st.sampled_from(["compatible", "earlier", "later"])


@st.composite
def inside(draw: st.DrawFn, kind: str) -> tuple[Transition, datetime]:
    """A transition of ``kind`` and a wall-clock time strictly within its window."""
    transition = draw(st.sampled_from(_transitions_of(kind)))
    start, end = transition.window
    seconds = int((end - start).total_seconds())
    offset = draw(st.integers(min_value=0, max_value=seconds - 1))
    return transition, start + timedelta(seconds=offset)


@st.composite
def near_transitions(draw: st.DrawFn) -> tuple[ZoneInfo, datetime]:
    """A zone and a wall time within a few hours of one of its transitions."""
    transition = draw(st.sampled_from(transitions()))
    start = transition.window[0]
    shift = draw(st.integers(min_value=-4 * 3600, max_value=4 * 3600))
    return load_zone(transition.zone), start + timedelta(seconds=shift)


zone_and_wall = st.one_of(st.tuples(zones, walls), near_transitions())


def test_the_scan_found_the_known_transitions() -> None:
    # Sanity of the oracle itself: New York's 2025 spring-forward at 07:00Z, Apia's lost day.
    found = {(t.zone, t.instant) for t in transitions()}
    assert ("America/New_York", datetime(2025, 3, 9, 7, tzinfo=UTC)) in found
    assert ("Pacific/Apia", datetime(2011, 12, 30, 10, tzinfo=UTC)) in found
    assert ("Australia/Lord_Howe", datetime(2025, 10, 4, 15, 30, tzinfo=UTC)) in found
    assert len(_transitions_of("gap")) > 100
    assert len(_transitions_of("overlap")) > 100


@PROPERTY_SETTINGS
@given(zone_and_wall, disambiguations)
def test_to_utc_is_aware_utc(zone_wall: tuple[ZoneInfo, datetime], disambiguation: str) -> None:
    zone, wall = zone_wall
    result = to_utc(wall, zone, disambiguation)  # type: ignore[arg-type]
    assert result.tzinfo is UTC


@PROPERTY_SETTINGS
@given(zone_and_wall)
def test_compatible_round_trips_except_in_gaps(zone_wall: tuple[ZoneInfo, datetime]) -> None:
    zone, wall = zone_wall
    shown = to_local(to_utc(wall, zone), zone)
    if classify(wall, zone) == "gap":
        # Read with the offset before the gap, the clock shows the time pushed forward by the gap.
        size = zone.utcoffset(wall.replace(fold=1)) - zone.utcoffset(wall)  # type: ignore[operator]
        assert size > timedelta(0)
        assert shown - wall == size
    else:
        assert shown == wall


@PROPERTY_SETTINGS
@given(inside("gap"))
def test_gap_times_are_gaps(case: tuple[Transition, datetime]) -> None:
    transition, wall = case
    zone = load_zone(transition.zone)
    assert classify(wall, zone) == "gap"
    compatible = to_utc(wall, zone)
    assert to_local(compatible, zone) - wall == transition.jump
    # 'compatible' = 'later' = read with the offset before; 'earlier' = with the offset after.
    assert (
        compatible == to_utc(wall, zone, "later") == (wall - transition.before).replace(tzinfo=UTC)
    )
    earlier = to_utc(wall, zone, "earlier")
    assert earlier == (wall - transition.after).replace(tzinfo=UTC)
    assert compatible - earlier == transition.jump
    # Both land on the right side of the transition.
    assert earlier < transition.instant <= compatible
    with pytest.raises(NonexistentLocalTime):
        to_utc(wall, zone, "reject")


@PROPERTY_SETTINGS
@given(inside("overlap"))
def test_overlap_times_are_overlaps(case: tuple[Transition, datetime]) -> None:
    transition, wall = case
    zone = load_zone(transition.zone)
    assert classify(wall, zone) == "overlap"
    earlier = to_utc(wall, zone, "earlier")
    later = to_utc(wall, zone, "later")
    assert to_utc(wall, zone) == earlier
    assert earlier < transition.instant <= later
    assert later - earlier == -transition.jump
    assert to_local(earlier, zone) == to_local(later, zone) == wall
    with pytest.raises(AmbiguousLocalTime):
        to_utc(wall, zone, "reject")


@PROPERTY_SETTINGS
@given(zone_and_wall)
def test_earlier_never_after_later(zone_wall: tuple[ZoneInfo, datetime]) -> None:
    zone, wall = zone_wall
    earlier, later = to_utc(wall, zone, "earlier"), to_utc(wall, zone, "later")
    assert earlier <= later
    kind = classify(wall, zone)
    assert (earlier < later) == (kind != "normal")
    if kind == "normal":
        assert to_utc(wall, zone, "reject") == earlier


@PROPERTY_SETTINGS
@given(zones, instants)
def test_every_instant_is_one_reading_of_its_wall_time(zone: ZoneInfo, instant: datetime) -> None:
    wall = to_local(instant, zone)
    assert classify(wall, zone) != "gap"
    assert instant in (to_utc(wall, zone, "earlier"), to_utc(wall, zone, "later"))


@PROPERTY_SETTINGS
@given(near_transitions(), st.integers(min_value=1, max_value=8 * 3600))
def test_monotonic_over_normal_times(zone_wall: tuple[ZoneInfo, datetime], step: int) -> None:
    zone, first = zone_wall
    second = first + timedelta(seconds=step)
    if classify(first, zone) == "normal" and classify(second, zone) == "normal":
        assert to_utc(first, zone) < to_utc(second, zone)


@PROPERTY_SETTINGS
@given(zones, walls, walls)
def test_monotonic_over_random_normal_times(zone: ZoneInfo, a: datetime, b: datetime) -> None:
    first, second = sorted((a, b))
    if first < second and classify(first, zone) == classify(second, zone) == "normal":
        assert to_utc(first, zone) < to_utc(second, zone)


# --- durations --------------------------------------------------------------------------------

exact_durations = st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=3650)).map(
    lambda clock: CalendarDuration(clock=clock)
)


@PROPERTY_SETTINGS
@given(instants, exact_durations, st.one_of(st.none(), zones))
def test_exact_add_then_subtract_is_identity(
    start: datetime, duration: CalendarDuration, zone: ZoneInfo | None
) -> None:
    due = add_duration(start, duration, zone)
    assert due.tzinfo is UTC
    assert due - duration.clock == start


@PROPERTY_SETTINGS
@given(
    st.one_of(
        st.tuples(zones, instants), near_transitions().map(lambda zw: (zw[0], to_utc(zw[1], zw[0])))
    ),
    st.integers(min_value=1, max_value=400),
)
def test_calendar_days_keep_wall_clock_unless_in_a_gap(
    zone_start: tuple[ZoneInfo, datetime], days: int
) -> None:
    zone, start = zone_start
    due = add_duration(start, CalendarDuration(days=days), zone)
    target = to_local(start, zone) + timedelta(days=days)
    shown = to_local(due, zone)
    if classify(target, zone) == "gap":
        assert shown > target
    else:
        assert shown == target


@PROPERTY_SETTINGS
@given(zones, instants, st.integers(min_value=1, max_value=240))
def test_calendar_months_clamp_and_keep_time_of_day(
    zone: ZoneInfo, start: datetime, months: int
) -> None:
    due = add_duration(start, CalendarDuration(months=months), zone)
    before = to_local(start, zone)
    target = add_months(before, months)
    total = before.year * 12 + before.month - 1 + months
    assert (target.year, target.month) == (total // 12, total % 12 + 1)
    assert target.day <= before.day
    assert target.day == before.day or target.day >= 28
    if classify(target, zone) != "gap":
        assert to_local(due, zone) == target


@PROPERTY_SETTINGS
@given(instants, st.integers(min_value=0, max_value=1200), st.integers(min_value=0, max_value=999))
def test_without_zone_calendar_parts_use_the_utc_calendar(
    start: datetime, months: int, days: int
) -> None:
    due = add_duration(start, CalendarDuration(months=months, days=days), None)
    expected = add_months(start.replace(tzinfo=None), months) + timedelta(days=days)
    assert due == expected.replace(tzinfo=UTC)
