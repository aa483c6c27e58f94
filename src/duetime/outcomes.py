"""What a handler can say besides "done": the explicit outcomes of Oban's contract.

Return normally → done. Raise any other exception → retried with backoff until ``max_attempts``,
then dead. Raise (or return) one of these to decide yourself.
"""

from __future__ import annotations

from datetime import timedelta


class HandlerOutcome(Exception):
    """Base of the explicit outcomes; raise it or return it from a handler."""


class Snooze(HandlerOutcome):
    """Try again after ``delay`` without spending an attempt (the work is not ready yet)."""

    def __init__(self, delay: timedelta | float) -> None:
        seconds = delay.total_seconds() if isinstance(delay, timedelta) else float(delay)
        if not seconds >= 0:
            raise ValueError("Snooze delay must be zero or positive")
        super().__init__(f"snoozed for {seconds:g}s")
        self.delay = timedelta(seconds=seconds)


class Retry(HandlerOutcome):
    """Fail this attempt and retry, after ``delay`` or after the backoff policy's delay."""

    def __init__(self, reason: str = "retry requested", delay: timedelta | float | None = None):
        super().__init__(reason)
        self.reason = reason
        if delay is None:
            self.delay: timedelta | None = None
        else:
            self.delay = delay if isinstance(delay, timedelta) else timedelta(seconds=delay)


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
