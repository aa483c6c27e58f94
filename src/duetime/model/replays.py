"""How many attempts a timer has made, and may make, since its latest replay.

A replay gives a dead timer a fresh set of attempts without numbering them anew: numbers go on
(the history keeps the earlier attempts, and every write about an attempt is fenced by its
number), and ``max_attempts`` grows by the attempts already made. Shown as stored, a timer
replayed after one attempt of 20 reads "1 of 21", which counts an attempt the replay forgave
and a budget nobody set; counted from the replay it reads "0 of 20", what it will do.

The replay is read off the attempts history: it followed the latest attempt that ended the timer
dead, unless the timer is still dead from that attempt. A timer made dead without an attempt of
its own (dead-lettered for want of a subscriber) leaves no such mark; its count is then the
stored one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from duetime.model import Attempt, Outcome, Status, Timer


@dataclass(frozen=True, slots=True)
class AttemptCount:
    made: int
    """Attempts since the latest replay (all of them, when it was never replayed)."""
    allowed: int
    """Attempts it may make since the latest replay before it is dead."""
    before: int
    """Attempts made before the latest replay (0: never replayed)."""

    def text(self) -> str:
        """``1 of 20``, or ``0 of 20 since the replay (1 before it)``."""
        count = f"{self.made} of {self.allowed}"
        return f"{count} since the replay ({self.before} before it)" if self.before else count


def attempt_count(timer: Timer, attempts: Sequence[Attempt]) -> AttemptCount:
    """``timer``'s attempts counted from its latest replay, which ``attempts`` (its history)
    tells."""
    replayed_after = max(
        (
            attempt.number
            for attempt in attempts
            if attempt.outcome is Outcome.DEAD
            and (attempt.number < timer.attempts or timer.status is not Status.DEAD)
        ),
        default=0,
    )
    return AttemptCount(
        timer.attempts - replayed_after, timer.max_attempts - replayed_after, replayed_after
    )
