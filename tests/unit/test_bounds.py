"""Every instant and duration is bounded, so the sums the worker and stores compute never overflow.

The property tests feed the real entry points (resolve_when, check_expires_after, Snooze, Retry,
Backoff, Settings) anything a caller could send, and check that each either refuses it with an
InvalidInput naming the field or returns a value whose sums with any accepted instant fit both a
``datetime`` and the stores' microsecond integers.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TypeVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from duetime.config import Settings
from duetime.errors import InvalidInput
from duetime.outcomes import Retry, Snooze
from duetime.store.codec import from_micros, to_micros
from duetime.timemath.backoff import Backoff
from duetime.timemath.bounds import EARLIEST_AT, LATEST_AT, MAX_DURATION
from duetime.timemath.recurrence import parse_recurrence
from duetime.timemath.when import resolve_when
from duetime.validation import check_expires_after

T = TypeVar("T")
LAST_AT = LATEST_AT - timedelta(microseconds=1)
instants = st.datetimes(
    min_value=EARLIEST_AT.replace(tzinfo=None),
    max_value=LAST_AT.replace(tzinfo=None),
    timezones=st.just(UTC),
)
durations = st.timedeltas(min_value=timedelta(0), max_value=MAX_DURATION)
anything_numeric = st.one_of(
    st.floats(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.timedeltas(),
    st.from_regex(
        r"P(\d{1,12}Y)?(\d{1,12}M)?(\d{1,12}D)?(T\d{1,15}(\.\d{1,3})?S)?",
        fullmatch=True,
    ),
    st.from_regex(r"\d{1,25}(\.\d{1,5})?", fullmatch=True),
)


def _attempt(call: Callable[[], T]) -> tuple[T | None, str | None]:
    """The value ``call`` returns, or the field its InvalidInput names."""
    try:
        return call(), None
    except InvalidInput as exc:
        return None, exc.field


def _stored(instant: datetime) -> datetime:
    """What a store keeps and gives back: a microsecond integer, read back as a datetime."""
    return from_micros(to_micros(instant))


@given(instants, durations, durations, durations)
def test_sums_of_accepted_values_stay_representable(
    instant: datetime, first: timedelta, second: timedelta, third: timedelta
) -> None:
    # due_at + expires_after, now + snooze, now + retry delay: even three at once fit.
    total = instant + first + second + third
    assert total.year <= 9999
    assert _stored(total) == total


@given(instants, anything_numeric, anything_numeric)
def test_a_delay_and_an_expiry_never_overflow(
    now: datetime, delay: object, expires_after: object
) -> None:
    when, field = _attempt(lambda: resolve_when(now=now, delay=delay))  # type: ignore[arg-type]
    assert field in {None, "delay"}
    due_at = now if when is None else when.due_at
    assert EARLIEST_AT <= due_at < LATEST_AT
    span, field = _attempt(lambda: check_expires_after(expires_after))
    assert field in {None, "expires_after"}
    if span is None:
        return
    assert timedelta(0) < span <= MAX_DURATION
    assert _stored(due_at + span) == due_at + span


@given(instants, anything_numeric)
def test_snooze_and_retry_delays_are_bounded_at_construction(now: datetime, delay: object) -> None:
    if isinstance(delay, str):
        return  # outcomes take a timedelta or seconds
    for make in (Snooze, lambda d: Retry("later", d)):
        outcome, field = _attempt(lambda: make(delay))  # noqa: B023
        assert field in {None, "delay"}
        if outcome is None:
            continue
        assert outcome.delay is not None
        assert timedelta(0) <= outcome.delay <= MAX_DURATION
        assert _stored(now + outcome.delay) == now + outcome.delay


@given(instants, anything_numeric, st.integers(min_value=1, max_value=10_000))
def test_retry_backoff_from_settings_is_bounded(now: datetime, cap: object, attempt: int) -> None:
    settings, field = _attempt(lambda: Settings.from_env({}, backoff_base=1, backoff_cap=cap))
    assert field in {None, "backoff_cap"}
    if settings is None:
        return
    wait = Backoff(settings.backoff_base, settings.backoff_cap).delay(attempt)
    assert wait <= MAX_DURATION
    assert _stored(now + wait) == now + wait


@given(anything_numeric)
def test_every_is_bounded(every: object) -> None:
    rule, field = _attempt(lambda: parse_recurrence(every=every))  # type: ignore[arg-type]
    assert field in {None, "every"}
    if rule is None:
        return
    assert rule.every is not None
    assert rule.every <= MAX_DURATION


@pytest.mark.parametrize(
    "value", [1e12, 8.6e13, 1e300, 10**40, "P101Y", "PT3200000000S", timedelta(days=36526)]
)
def test_expires_after_over_100_years_names_the_field(value: object) -> None:
    with pytest.raises(InvalidInput, match="100 years") as caught:
        check_expires_after(value)
    assert caught.value.field == "expires_after"


def test_expires_after_up_to_100_years_is_accepted() -> None:
    assert check_expires_after(MAX_DURATION) == MAX_DURATION
    assert check_expires_after("P36525D") == MAX_DURATION


@pytest.mark.parametrize("value", [-1, float("nan"), float("inf"), 1e10, timedelta(days=-1)])
def test_snooze_and_retry_refuse_bad_delays(value: float | timedelta) -> None:
    with pytest.raises(InvalidInput) as caught:
        Snooze(value)
    assert caught.value.field == "delay"
    with pytest.raises(InvalidInput) as caught:
        Retry("later", value)
    assert caught.value.field == "delay"


def test_backoff_cap_over_100_years_is_refused() -> None:
    with pytest.raises(ValueError, match="100 years"):
        Backoff(timedelta(seconds=1), MAX_DURATION + timedelta(days=1))


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("9000-01-01T00:00:00Z", "out of range"),
        ("1969-12-31T23:59:59Z", "out of range"),
        ("8999-12-31T23:59:59Z", None),
        ("2025-02-29T09:00:00Z", "does not exist"),
        ("2024-02-30T09:00:00+01:00", "does not exist"),
    ],
)
def test_instants_are_bounded(value: str, message: str | None) -> None:
    now = datetime(2025, 1, 1, tzinfo=UTC)
    if message is None:
        assert resolve_when(now=now, at=value).due_at.year == 8999
        return
    with pytest.raises(InvalidInput, match=message) as caught:
        resolve_when(now=now, at=value)
    assert caught.value.field == "at"
