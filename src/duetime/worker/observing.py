"""What a worker reports: hooks for metrics, and counts of what it did."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol, runtime_checkable

from duetime.model import Outcome, Timer


@runtime_checkable
class WorkerObserver(Protocol):
    """Hooks for metrics: called on the event loop, must be quick and must not raise.

    Each hook does nothing by default: an observer that derives from this class writes only
    the hooks it wants. One that does not (any object with the hooks) is given the defaults of
    the hooks it lacks by the worker (:func:`with_defaults`), so an observer written before a
    hook was added keeps working."""

    def claimed(self, namespace: str, count: int, seconds: float) -> None:
        """A claim took ``count`` due timers in ``seconds``."""
        return

    def started(self, timer: Timer, attempt: int, lateness: timedelta) -> None:
        """The handler of ``timer``'s ``attempt`` began, ``lateness`` after it was due."""
        return

    def finished(self, timer: Timer, outcome: Outcome) -> None:
        """``timer``'s attempt ended with ``outcome`` (its write may still be under way)."""
        return

    def held_back(self, namespace: str, pattern: str) -> None:
        """A claim found the limit on ``pattern`` full: due timers of its types wait."""
        return

    def idle(self, namespace: str, next_due: datetime | None) -> None:
        """The worker found nothing more to claim in ``namespace`` and goes to sleep: until
        ``next_due``, the earliest timer it may claim (None: none pending), a wake-up hint or
        its safety re-check, whichever comes first. Called each time it goes to sleep so."""
        return


_HOOKS = ("claimed", "started", "finished", "held_back", "idle")


class _Defaulted(WorkerObserver):
    """An observer lacking some hooks: those it has are its own, the others the defaults."""

    def __init__(self, observer: object) -> None:
        for name in _HOOKS:
            if hasattr(observer, name):
                setattr(self, name, getattr(observer, name))


def with_defaults(observer: object) -> WorkerObserver:
    """``observer``, or when it lacks some of the hooks, one with the defaults for those."""
    if isinstance(observer, WorkerObserver):  # it has every hook
        return observer
    return _Defaulted(observer)


@dataclass
class WorkerStats:
    """What this worker did since it started, by outcome."""

    claimed: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    lost: int = 0

    def total(self) -> int:
        return sum(self.outcomes.values())
