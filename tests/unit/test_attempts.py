"""What one attempt's result means: the executor's pure mapping, without a store or a loop."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from duetime.model import Finish, Outcome, Status, Timer
from duetime.outcomes import Cancel, Dead, HandlerOutcome, Retry, Snooze
from duetime.worker import attempts

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
DUE = NOW - timedelta(seconds=3)


def timer(max_attempts: int = 3, expires_after: timedelta | None = None) -> Timer:
    return Timer(
        7,
        "ns",
        "k",
        "t",
        None,
        None,
        DUE,
        Status.RUNNING,
        1,
        max_attempts,
        DUE,
        NOW,
        DUE,
        expires_after=expires_after,
    )


def backoff(attempt: int) -> timedelta:
    return timedelta(seconds=10 * attempt)


def judge(result: object = None, error: BaseException | None = None, attempt: int = 1) -> Finish:
    return attempts.finish_for(timer(), attempt, result, error, NOW, backoff)


def test_a_return_is_done() -> None:
    finish = judge("anything")
    assert (finish.timer_id, finish.attempt, finish.outcome) == (7, 1, Outcome.DONE)
    assert finish.error is None
    assert finish.run_at is None


def test_an_exception_retries_after_the_backoff_with_its_description() -> None:
    finish = judge(error=ConnectionError("refused"), attempt=2)
    assert finish.outcome is Outcome.RETRY
    assert finish.error == "ConnectionError: refused"
    assert finish.run_at == NOW + timedelta(seconds=20)


class Unprintable(Exception):
    def __str__(self) -> str:
        raise ValueError("no text")


def test_an_exception_whose_str_fails_is_an_ordinary_failure_named_by_its_type() -> None:
    finish = judge(error=Unprintable(), attempt=1)
    assert finish.outcome is Outcome.RETRY
    assert finish.error == "Unprintable: <str() raised ValueError>"
    assert finish.traceback is not None
    assert "Unprintable" in finish.traceback


def test_the_last_attempt_is_dead_and_says_how_many_were_made() -> None:
    finish = judge(error=ValueError("bad"), attempt=3)
    assert finish.outcome is Outcome.DEAD
    assert finish.error == "gave up after 3 attempts: ValueError: bad"
    assert finish.run_at is None


@pytest.mark.parametrize("raised", [True, False])
def test_explicit_outcomes_are_the_same_raised_or_returned(raised: bool) -> None:
    cases: list[tuple[HandlerOutcome, Outcome]] = [
        (Snooze(30), Outcome.SNOOZED),
        (Cancel("unsubscribed"), Outcome.CANCELLED),
        (Dead("poison"), Outcome.DEAD),
        (Retry("later", delay=5), Outcome.RETRY),
    ]
    for outcome, expected in cases:
        finish = judge(error=outcome) if raised else judge(outcome)
        assert finish.outcome is expected
    assert judge(Snooze(30)).run_at == NOW + timedelta(seconds=30)
    assert judge(Retry("later", delay=5)).run_at == NOW + timedelta(seconds=5)
    assert judge(Retry("later")).run_at == NOW + timedelta(seconds=10)
    assert judge(Cancel("unsubscribed")).error == "unsubscribed"
    assert judge(Dead("poison")).error == "poison"


def test_a_retry_on_the_last_attempt_is_dead() -> None:
    finish = judge(Retry("later", delay=5), attempt=3)
    assert finish.outcome is Outcome.DEAD
    assert finish.error == "gave up after 3 attempts: later"


def test_long_errors_are_cut() -> None:
    finish = judge(error=RuntimeError("x" * 10_000), attempt=3)
    assert finish.error is not None
    assert len(finish.error) == attempts.MAX_ERROR_LENGTH


def test_stale_means_past_expires_after() -> None:
    assert not attempts.is_stale(timer(), NOW)
    assert not attempts.is_stale(timer(expires_after=timedelta(seconds=3)), NOW)
    stale = timer(expires_after=timedelta(seconds=2))
    assert attempts.is_stale(stale, NOW)
    finish = attempts.expired(stale, 1, NOW)
    assert finish.outcome is Outcome.EXPIRED
    assert finish.error is not None
    assert "stale" in finish.error


def test_an_interrupted_attempt_retries_at_once() -> None:
    finish = attempts.interrupted(timer(), 2, NOW)
    assert (finish.outcome, finish.run_at) == (Outcome.RETRY, NOW)


@given(attempt=st.integers(min_value=1, max_value=50), max_attempts=st.integers(1, 50))
def test_a_failure_is_dead_exactly_when_no_attempt_is_left(attempt: int, max_attempts: int) -> None:
    finish = attempts.finish_for(timer(max_attempts), attempt, None, OSError("down"), NOW, backoff)
    assert (finish.outcome is Outcome.DEAD) == (attempt >= max_attempts)
    assert (finish.run_at is None) == (attempt >= max_attempts)


def _raise_nested(depth: int) -> None:
    if depth:
        _raise_nested(depth - 1)
    raise ValueError("deep\x00down")


def test_a_failure_keeps_its_traceback_innermost_frame_and_all() -> None:
    try:
        _raise_nested(2)
    except ValueError as exc:
        finish = attempts.finish_for(timer(), 1, None, exc, NOW, backoff)
    assert finish.outcome is Outcome.RETRY
    assert finish.traceback is not None
    assert finish.traceback.startswith("Traceback (most recent call last):")
    assert "_raise_nested" in finish.traceback
    assert finish.traceback.endswith("ValueError: deep\\x00down\n")


def test_the_last_failure_keeps_its_traceback_and_explicit_outcomes_have_none() -> None:
    try:
        _raise_nested(0)
    except ValueError as exc:
        dead = attempts.finish_for(timer(max_attempts=1), 1, None, exc, NOW, backoff)
    assert dead.outcome is Outcome.DEAD
    assert dead.traceback is not None
    assert "ValueError" in dead.traceback
    for outcome in (Retry("later"), Dead("no"), Cancel(), Snooze(5)):
        assert attempts.finish_for(timer(), 1, None, outcome, NOW, backoff).traceback is None


def test_a_long_traceback_keeps_its_innermost_frames_within_the_bound() -> None:
    cause: BaseException | None = None
    for n in range(300):  # a chain of causes: each adds a traceback of its own
        try:
            raise KeyError(n) from cause
        except KeyError as exc:
            cause = exc
    assert cause is not None
    text = attempts.trace(cause)
    assert len(text) <= attempts.MAX_TRACEBACK_LENGTH
    assert text.splitlines()[0].endswith("characters of outer frames cut)")
    assert text.endswith("KeyError: 299\n")
    assert "KeyError: 0\n" not in text
