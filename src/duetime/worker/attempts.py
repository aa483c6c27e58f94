"""What one attempt's result means: a handler's return value or exception → a :class:`Finish`.

Pure (no I/O, no clock, no logging): the executor passes ``now`` and the retry policy, so the
whole contract — return = done, raise = retry with backoff until ``max_attempts`` then dead,
and the explicit :mod:`duetime.outcomes` — is unit-tested on its own.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from duetime.model import Finish, Outcome, Timer
from duetime.outcomes import Cancel, Dead, HandlerOutcome, Retry, Snooze

MAX_ERROR_LENGTH = 2000

RetryDelay = Callable[[int], timedelta]
"""The backoff delay after failed attempt number ``n`` (jittered by the caller's policy)."""


def finish_for(
    timer: Timer,
    attempt: int,
    result: Any,
    error: BaseException | None,
    now: datetime,
    retry_delay: RetryDelay,
) -> Finish:
    """The outcome of ``attempt`` whose handler returned ``result`` or raised ``error``."""
    if error is None:
        if isinstance(result, HandlerOutcome):
            return explicit(result, timer, attempt, now, retry_delay)
        return Finish(timer.id, attempt, Outcome.DONE)
    if isinstance(error, HandlerOutcome):
        return explicit(error, timer, attempt, now, retry_delay)
    return failed(timer, attempt, describe(error), None, now, retry_delay)


def explicit(
    outcome: HandlerOutcome, timer: Timer, attempt: int, now: datetime, retry_delay: RetryDelay
) -> Finish:
    """The outcome a handler chose: Snooze, Cancel, Dead or Retry (another subclass: a failure)."""
    if isinstance(outcome, Snooze):
        return Finish(timer.id, attempt, Outcome.SNOOZED, run_at=now + outcome.delay)
    if isinstance(outcome, Cancel):
        return Finish(timer.id, attempt, Outcome.CANCELLED, error=outcome.reason)
    if isinstance(outcome, Dead):
        return Finish(timer.id, attempt, Outcome.DEAD, error=outcome.reason)
    if isinstance(outcome, Retry):
        return failed(timer, attempt, outcome.reason, outcome.delay, now, retry_delay)
    return failed(timer, attempt, describe(outcome), None, now, retry_delay)


def failed(
    timer: Timer,
    attempt: int,
    error: str,
    delay: timedelta | None,
    now: datetime,
    retry_delay: RetryDelay,
) -> Finish:
    """A failed attempt: retried after ``delay`` (else the backoff's), or dead when it was the
    last one ``max_attempts`` allows."""
    if attempt >= timer.max_attempts:
        return Finish(
            timer.id,
            attempt,
            Outcome.DEAD,
            error=f"gave up after {attempt} attempts: {error}"[:MAX_ERROR_LENGTH],
        )
    wait = delay if delay is not None else retry_delay(attempt)
    return Finish(timer.id, attempt, Outcome.RETRY, error=error, run_at=now + wait)


def is_stale(timer: Timer, now: datetime) -> bool:
    """Past its ``expires_after``: it is recorded expired instead of running (seed 004)."""
    return timer.expires_after is not None and now > timer.due_at + timer.expires_after


def expired(timer: Timer, attempt: int, now: datetime) -> Finish:
    return Finish(
        timer.id,
        attempt,
        Outcome.EXPIRED,
        error=f"stale: due {timer.due_at.isoformat()}, "
        f"found {now - timer.due_at} late (expires_after {timer.expires_after})",
    )


def interrupted(timer: Timer, attempt: int, now: datetime) -> Finish:
    """A handler cancelled by shutdown: retried at once by whichever node is up next."""
    return Finish(
        timer.id,
        attempt,
        Outcome.RETRY,
        error="worker shut down before the handler finished",
        run_at=now,
    )


def describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text[:MAX_ERROR_LENGTH]
