"""What one attempt's result means: a handler's return value or exception → a :class:`Finish`.

Pure (no I/O, no clock, no logging): the executor passes ``now`` and the retry policy, so the
whole contract — return = done, raise = retry with backoff until ``max_attempts`` then dead,
and the explicit :mod:`duetime.outcomes` — is unit-tested on its own.
"""

from __future__ import annotations

import traceback as tb
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from duetime.model import Finish, Outcome, Timer
from duetime.outcomes import Cancel, Dead, HandlerOutcome, Retry, Snooze

MAX_ERROR_LENGTH = 2000
MAX_TRACEBACK_LENGTH = 16 * 1024
"""Characters of a failed attempt's traceback kept: the innermost frames, where it was raised."""

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
    """The outcome of ``attempt`` whose handler returned ``result`` or raised ``error``.

    Never raises: a next attempt that cannot be placed in time (a delay past the year 9999)
    ends the timer dead, with the reason."""
    try:
        return _finish_for(timer, attempt, result, error, now, retry_delay)
    except (OverflowError, ValueError) as exc:
        return Finish(
            timer.id, attempt, Outcome.DEAD, error=f"no next attempt could be set: {describe(exc)}"
        )


def _finish_for(
    timer: Timer,
    attempt: int,
    result: Any,
    error: BaseException | None,
    now: datetime,
    retry_delay: RetryDelay,
) -> Finish:
    if error is None:
        if isinstance(result, HandlerOutcome):
            return explicit(result, timer, attempt, now, retry_delay)
        return Finish(timer.id, attempt, Outcome.DONE)
    if isinstance(error, HandlerOutcome):
        return explicit(error, timer, attempt, now, retry_delay)
    return failed(timer, attempt, describe(error), None, now, retry_delay, trace(error))


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
    traceback: str | None = None,
) -> Finish:
    """A failed attempt: retried after ``delay`` (else the backoff's), or dead when it was the
    last one ``max_attempts`` allows."""
    if attempt >= timer.max_attempts:
        return Finish(
            timer.id,
            attempt,
            Outcome.DEAD,
            error=f"gave up after {attempt} attempts: {error}"[:MAX_ERROR_LENGTH],
            traceback=traceback,
        )
    wait = delay if delay is not None else retry_delay(attempt)
    return Finish(
        timer.id, attempt, Outcome.RETRY, error=error, run_at=now + wait, traceback=traceback
    )


def is_stale(timer: Timer, now: datetime) -> bool:
    """Past its ``expires_after``: it is recorded expired instead of running (a stale
    message is worse than none). A window that reaches past the last instant a datetime holds
    never closes."""
    if timer.expires_after is None:
        return False
    try:
        return now > timer.due_at + timer.expires_after
    except OverflowError:
        return False


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
    """``Type: message``, cut to :data:`MAX_ERROR_LENGTH`, without NUL characters (which no
    database text column takes: one such message must not keep its outcome from being
    written). An exception whose ``str()`` fails is still described, by its type: it is a
    failed attempt like any other, not a second failure of the worker's."""
    try:
        message = str(exc)
    except BaseException as problem:  # the handler's own code, run to describe its exception
        message = f"<str() raised {type(problem).__name__}>"
    text = f"{type(exc).__name__}: {message}".replace("\x00", "\\x00")
    return text[:MAX_ERROR_LENGTH]


def trace(exc: BaseException) -> str:
    """The formatted traceback of ``exc`` (its causes too), at most :data:`MAX_TRACEBACK_LENGTH`
    characters: when longer, the outermost lines go — the innermost frames and the exception
    itself are what says where it failed. Without NUL characters, as :func:`describe`."""
    text = "".join(tb.format_exception(exc)).replace("\x00", "\\x00")
    if len(text) <= MAX_TRACEBACK_LENGTH:
        return text
    kept = text[len(text) - MAX_TRACEBACK_LENGTH + 80 :]
    kept = kept[kept.find("\n") + 1 :]  # from a line's start
    return f"... ({len(text) - len(kept)} characters of outer frames cut)\n{kept}"


def unreadable(claimed_id: int, attempt: int, problem: str) -> Finish:
    """A claimed row that could not be read: dead, saying why (replay it once fixed)."""
    return Finish(
        claimed_id,
        attempt,
        Outcome.DEAD,
        error=f"the stored timer could not be read: {problem}"[:MAX_ERROR_LENGTH],
    )


def unstartable(timer: Timer, attempt: int, exc: BaseException) -> Finish:
    """Preparing an attempt failed before its handler could run (a bug, not the handler's)."""
    return Finish(
        timer.id,
        attempt,
        Outcome.DEAD,
        error=f"the attempt could not be started: {describe(exc)}"[:MAX_ERROR_LENGTH],
        traceback=trace(exc),
    )


def unrecordable(finish: Finish, exc: BaseException) -> Finish:
    """An outcome the store refused to write (alone, not with its batch): recorded instead as
    dead, with the store's reason and what the outcome was."""
    return Finish(
        finish.timer_id,
        finish.attempt,
        Outcome.DEAD,
        error=(f"the outcome {finish.outcome.value} could not be recorded: {describe(exc)}")[
            :MAX_ERROR_LENGTH
        ],
        claim_token=finish.claim_token,
        started_at=finish.started_at,
    )
