"""The run window's time math: within [due, due + window], deterministic, evenly spread."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from duetime.errors import InvalidInput
from duetime.timemath.run_window import (
    check_spread,
    check_window,
    check_window_within,
    even_offset,
    hash_fraction,
    hashed_instant,
    hashed_offset,
)

instants = st.datetimes(
    min_value=datetime(1970, 1, 2), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
)
windows = st.timedeltas(min_value=timedelta(microseconds=1), max_value=timedelta(days=400))
texts = st.text(min_size=1, max_size=40)


@given(texts, texts, instants, windows)
def test_a_hashed_instant_is_never_before_due_nor_after_the_window(
    namespace: str, key: str, due: datetime, window: timedelta
) -> None:
    at = hashed_instant(namespace, key, due, window)
    assert due <= at <= due + window
    assert at == hashed_instant(namespace, key, due, window)  # the same every call


@given(texts, texts, instants, windows)
def test_the_offset_depends_on_the_instant_not_on_its_zone(
    namespace: str, key: str, due: datetime, window: timedelta
) -> None:
    elsewhere = due.astimezone(datetime.now().astimezone().tzinfo)
    assert hashed_offset(namespace, key, elsewhere, window) == hashed_offset(
        namespace, key, due, window
    )


def test_the_hash_is_fixed_across_machines_and_releases() -> None:
    # SHA-256 of "ns\0k\02026-01-01T09:00:00.000000Z": a change here moves every stored timer.
    due = datetime(2026, 1, 1, 9, tzinfo=UTC)
    assert hash_fraction("ns", "k", due) == 0x4BE600D47315068F
    assert hashed_offset("ns", "k", due, timedelta(minutes=15)) == timedelta(
        microseconds=(0x4BE600D47315068F * 900_000_000) >> 64
    )


@given(st.integers(min_value=1, max_value=5000), windows)
def test_an_even_spread_is_exactly_even_and_within_the_window(
    total: int, window: timedelta
) -> None:
    offsets = [even_offset(rank, total, window) for rank in range(total)]
    assert offsets[0] == timedelta(0)
    assert all(timedelta(0) <= o <= window for o in offsets)
    assert offsets == sorted(offsets)
    micros = window // timedelta(microseconds=1)
    for rank, offset in enumerate(offsets):  # each within a microsecond of the ideal
        got = offset // timedelta(microseconds=1)
        assert got * total <= rank * micros < (got + 1) * total


def test_even_offsets_refuse_a_rank_outside_the_group() -> None:
    with pytest.raises(ValueError, match="not within"):
        even_offset(3, 3, timedelta(minutes=1))


def test_a_window_is_a_positive_duration() -> None:
    with pytest.raises(InvalidInput) as caught:
        check_window(timedelta(0))
    assert caught.value.field == "window"
    with pytest.raises(InvalidInput) as caught:
        check_spread("random")
    assert caught.value.field == "spread"


def test_a_schedules_window_fits_in_its_period() -> None:
    check_window_within(timedelta(hours=1), timedelta(hours=1))
    with pytest.raises(InvalidInput, match="period") as caught:
        check_window_within(timedelta(hours=2), timedelta(hours=1))
    assert caught.value.field == "window"
