"""Rates: parsing (bad input names the field) and the GCRA's promise, checked as a property: in
no window are more starts granted than its burst plus the rate over the window."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from duetime.errors import InvalidInput
from duetime.timemath.ratelimit import (
    Rate,
    allowance,
    default_burst,
    next_allowed,
    parse_rate,
    spend,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "rate"),
    [
        ("100/s", Rate(100, timedelta(seconds=1))),
        ("6000/min", Rate(6000, timedelta(minutes=1))),
        ("10/30s", Rate(10, timedelta(seconds=30))),
        ("5/hour", Rate(5, timedelta(hours=1))),
        (" 7 / 2h ", Rate(7, timedelta(hours=2))),
    ],
)
def test_rates_parse(text: str, rate: Rate) -> None:
    assert parse_rate(text) == rate
    assert parse_rate(str(rate)) == rate


@pytest.mark.parametrize("text", ["0/s", "fast", "10", "10/fortnight", "-1/s", "5/0s", "1/2d"])
def test_bad_rates_name_the_field(text: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        parse_rate(text)
    assert raised.value.field == "rate"


def test_the_interval_never_exceeds_the_rate() -> None:
    assert Rate(3, timedelta(seconds=1)).interval == timedelta(microseconds=333_334)
    assert default_burst(Rate(200, timedelta(seconds=1))) == 10
    assert default_burst(Rate(1, timedelta(hours=1))) == 1


def test_a_fresh_rate_grants_its_burst_then_one_per_interval() -> None:
    rate = Rate(10, timedelta(seconds=1))
    assert allowance(rate, 3, None, T0) == 3
    tat = spend(rate, None, T0, 3)
    assert allowance(rate, 3, tat, T0) == 0
    assert next_allowed(rate, 3, tat, T0) == T0 + timedelta(milliseconds=100)
    assert allowance(rate, 3, tat, T0 + timedelta(milliseconds=100)) == 1
    assert allowance(rate, 3, tat, T0 + timedelta(seconds=10)) == 3  # never more than the burst


@settings(max_examples=200, deadline=None)
@given(
    count=st.integers(1, 50),
    period_ms=st.integers(10, 5000),
    burst=st.integers(1, 20),
    steps=st.lists(st.tuples(st.integers(0, 400), st.integers(1, 40)), min_size=1, max_size=60),
)
def test_no_window_holds_more_than_the_burst_plus_the_rate(
    count: int, period_ms: int, burst: int, steps: list[tuple[int, int]]
) -> None:
    rate = Rate(count, timedelta(milliseconds=period_ms))
    tat: datetime | None = None
    now = T0
    starts: list[datetime] = []
    for gap_ms, want in steps:
        now += timedelta(milliseconds=gap_ms)
        granted = min(want, allowance(rate, burst, tat, now))
        assert granted >= 0
        if granted:
            tat = spend(rate, tat, now, granted)
            starts.extend([now] * granted)
        if granted < want:
            assert next_allowed(rate, burst, tat, now) > now
    for i, first in enumerate(starts):
        for j in range(i, len(starts)):
            window = starts[j] - first
            assert j - i + 1 <= burst + window // rate.interval
