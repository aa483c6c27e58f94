"""What a handler can say besides "done": the explicit outcomes of Oban's contract.

Return normally → done. Raise any other exception → retried with backoff until ``max_attempts``,
then dead. Raise (or return) one of these to decide yourself.
"""

from __future__ import annotations

from datetime import timedelta

from duetime.timemath.bounds import duration_value


class HandlerOutcome(Exception):
    """Base of the explicit outcomes; raise it or return it from a handler."""


class Snooze(HandlerOutcome):
    """Try again after ``delay`` without spending an attempt (the work is not ready yet).

    ``delay`` (a timedelta or seconds) is 0 to 100 years; anything else raises InvalidInput."""

    def __init__(self, delay: timedelta | float) -> None:
        self.delay = duration_value(delay, "delay")  # 0..100 years: now + delay stays in range
        super().__init__(f"snoozed for {self.delay.total_seconds():g}s")


class Retry(HandlerOutcome):
    """Fail this attempt and retry, after ``delay`` or after the backoff policy's delay.

    ``delay`` (a timedelta or seconds) is 0 to 100 years; anything else raises InvalidInput."""

    def __init__(self, reason: str = "retry requested", delay: timedelta | float | None = None):
        super().__init__(reason)
        self.reason = reason
        self.delay = None if delay is None else duration_value(delay, "delay")


class Cancel(HandlerOutcome):
    """Stop for good without an error: the timer ends ``cancelled`` (e.g. the user unsubscribed)."""

    def __init__(self, reason: str = "cancelled by handler") -> None:
        super().__init__(reason)
        self.reason = reason


class Dead(HandlerOutcome):
    """Stop for good with an error: the timer goes to the dead-letter queue at once."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
