"""What a worker reports: hooks for metrics, and counts of what it did."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Protocol

from duetime.model import Outcome, Timer


class WorkerObserver(Protocol):
    """Hooks for metrics: called on the event loop, must be quick and must not raise."""

    def claimed(self, namespace: str, count: int, seconds: float) -> None: ...

    def started(self, timer: Timer, attempt: int, lateness: timedelta) -> None: ...

    def finished(self, timer: Timer, outcome: Outcome) -> None: ...

    def held_back(self, namespace: str, pattern: str) -> None:
        """A claim found the limit on ``pattern`` full: due timers of its types wait."""
        ...


@dataclass
class WorkerStats:
    """What this worker did since it started, by outcome."""

    claimed: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    lost: int = 0

    def total(self) -> int:
        return sum(self.outcomes.values())
