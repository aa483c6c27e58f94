"""Retry delays: exponential backoff with jitter, pure and seedable.

Jitter spreads retries of many timers that failed together (a broker outage) so they do not all
return at the same instant. "Equal jitter": half the delay is fixed, half random, so a retry is
never sooner than half the nominal delay.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import timedelta

from duetime.timemath.bounds import MAX_DURATION


@dataclass(frozen=True, slots=True)
class Backoff:
    """``base * 2**(attempt-1)`` capped at ``cap``, then jittered by ``jitter`` (0..1)."""

    base: timedelta = timedelta(seconds=2)
    cap: timedelta = timedelta(hours=1)
    jitter: float = 0.5

    def __post_init__(self) -> None:
        if self.base <= timedelta(0):
            raise ValueError("backoff base must be positive")
        if self.cap < self.base:
            raise ValueError("backoff cap must be at least the base")
        if self.cap > MAX_DURATION:
            raise ValueError("backoff cap must not be longer than 100 years")
        if not 0.0 <= self.jitter <= 1.0:
            raise ValueError("backoff jitter must be between 0 and 1")

    def nominal(self, attempt: int) -> timedelta:
        """The delay before retrying after failed attempt number ``attempt`` (1-based)."""
        if attempt < 1:
            raise ValueError("attempt numbers start at 1")
        exponent = min(attempt - 1, 62)
        seconds = min(self.cap.total_seconds(), self.base.total_seconds() * 2.0**exponent)
        return timedelta(seconds=seconds)

    def delay(self, attempt: int, rng: random.Random | None = None) -> timedelta:
        """The nominal delay with jitter applied: in ``[nominal*(1-jitter), nominal]``."""
        nominal = self.nominal(attempt).total_seconds()
        draw = (rng or random).random()
        return timedelta(seconds=nominal * (1.0 - self.jitter * draw))
