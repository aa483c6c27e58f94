"""What ``run_due`` reports: one :class:`Fired` per attempt, and the checks it makes after.

A worker observer records each finished attempt as it happens; the report is read back from the
store afterwards, so ``Fired.timer`` is the row as stored, not as the handler saw it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from duetime.model import Attempt, Outcome, Timer
from duetime.testing.matching import listing
from duetime.testing.pinning import iso

DEFAULT_MAX_ROUNDS = 100
_FAILED = (Outcome.RETRY, Outcome.DEAD)


@dataclass(frozen=True, slots=True)
class Fired:
    """One attempt that :meth:`AsyncHarness.run_due` made, and how it ended.

    ``timer`` is the timer as stored after the run (its ``status`` says where it went next);
    ``error`` is this attempt's error, if it had one.
    """

    key: str
    type: str
    attempt: int
    outcome: Outcome
    error: str | None
    timer: Timer

    @property
    def ok(self) -> bool:
        """True when the handler finished the timer (returned normally)."""
        return self.outcome is Outcome.DONE

    def describe(self) -> str:
        text = f"{self.type} key={self.key!r} attempt {self.attempt}: {self.outcome.value}"
        if self.error:
            text += f" ({self.error})"
        return text


class Recorder:
    """A worker observer that remembers which timers finished, and how."""

    def __init__(self) -> None:
        self.results: list[tuple[Timer, Outcome]] = []

    def claimed(self, namespace: str, count: int, seconds: float) -> None:
        return None

    def started(self, timer: Timer, attempt: int, lateness: timedelta) -> None:
        return None

    def finished(self, timer: Timer, outcome: Outcome) -> None:
        self.results.append((timer, outcome))

    def held_back(self, namespace: str, pattern: str) -> None:
        return None

    def idle(self, namespace: str, next_due: datetime | None) -> None:
        return None


def fired(
    finished: Sequence[tuple[Timer, Outcome]],
    stored: dict[str, Timer],
    attempts: dict[str, list[Attempt]],
) -> list[Fired]:
    """The report of ``finished`` attempts, with each timer and attempt error as stored."""
    result = []
    for timer, outcome in finished:
        number = timer.attempts
        error = next((a.error for a in attempts[timer.key] if a.number == number), None)
        result.append(Fired(timer.key, timer.type, number, outcome, error, stored[timer.key]))
    return result


def check_max_rounds(max_rounds: int) -> None:
    if isinstance(max_rounds, bool) or not isinstance(max_rounds, int) or max_rounds < 1:
        raise ValueError(f"max_rounds must be a whole number of at least 1, not {max_rounds!r}")


def check_settled(
    max_rounds: int,
    report: Sequence[Fired],
    pending: Sequence[Timer],
    types: Sequence[str],
    now: datetime,
) -> None:
    """After ``max_rounds`` busy rounds, fail if a timer with a handler is due still."""
    due = [t for t in pending if t.run_at <= now and t.type in types]
    if due:
        raise AssertionError(
            f"{len(due)} timers were still due after {max_rounds} rounds at {iso(now)}: a "
            "handler keeps making work due at the pinned instant (Snooze(0), Retry(delay=0), "
            "or an emit loop?)\nstill due:\n"
            + listing(due)
            + "\nlast attempts:\n"
            + "\n".join(f"  - {f.describe()}" for f in report[-10:])
        )


def check_failures(report: Sequence[Fired]) -> None:
    """With ``fail_on_error``: fail naming every attempt that ended in retry or dead."""
    failed = [f for f in report if f.outcome in _FAILED]
    if failed:
        raise AssertionError(
            f"{len(failed)} handler attempts failed:\n"
            + "\n".join(f"  - {f.describe()}" for f in failed)
        )
