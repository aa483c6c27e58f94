"""Retry delays: exponential, capped, jittered within documented bounds."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from duetime.timemath.backoff import Backoff


def test_nominal_doubles_from_the_base_and_stops_at_the_cap() -> None:
    backoff = Backoff(base=timedelta(seconds=2), cap=timedelta(seconds=60))
    assert [backoff.nominal(n).total_seconds() for n in range(1, 8)] == [2, 4, 8, 16, 32, 60, 60]


def test_huge_attempt_numbers_do_not_overflow() -> None:
    assert Backoff().nominal(10_000) == timedelta(hours=1)


@given(attempt=st.integers(min_value=1, max_value=200), seed=st.integers())
def test_jittered_delay_stays_between_half_and_full_nominal(attempt: int, seed: int) -> None:
    backoff = Backoff()
    delay = backoff.delay(attempt, random.Random(seed))
    nominal = backoff.nominal(attempt)
    assert nominal / 2 <= delay <= nominal


def test_jitter_spreads_retries() -> None:
    rng = random.Random(7)
    delays = {Backoff().delay(3, rng) for _ in range(50)}
    assert len(delays) > 40


@pytest.mark.parametrize(
    "kwargs",
    [
        {"base": timedelta(0)},
        {"base": timedelta(seconds=10), "cap": timedelta(seconds=5)},
        {"jitter": 1.5},
    ],
)
def test_bad_policies_are_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):  # noqa: PT011
        Backoff(**kwargs)  # type: ignore[arg-type]


def test_attempt_numbers_start_at_one() -> None:
    with pytest.raises(ValueError, match="start at 1"):
        Backoff().nominal(0)
