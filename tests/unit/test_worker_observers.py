"""Worker observers: every hook has a default, whether or not the observer derives from the
protocol."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from duetime.model import Outcome, Timer
from duetime.worker.observing import WorkerObserver, with_defaults


class Counting(WorkerObserver):
    """Derives from the protocol and writes one hook only."""

    def __init__(self) -> None:
        self.claims = 0

    def claimed(self, namespace: str, count: int, seconds: float) -> None:
        self.claims += count


class BeforeFlowControl:
    """Any object with the hooks of its day: no ``held_back``."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def claimed(self, namespace: str, count: int, seconds: float) -> None:
        self.seen.append(f"claimed {count}")

    def started(self, timer: Timer, attempt: int, lateness: timedelta) -> None:
        self.seen.append("started")

    def finished(self, timer: Timer, outcome: Outcome) -> None:
        self.seen.append(f"finished {outcome.value}")


def test_a_derived_observer_is_used_as_it_is_with_defaults_for_the_rest() -> None:
    observer = Counting()
    assert with_defaults(observer) is observer
    observer.claimed("ns", 3, 0.1)
    observer.held_back("ns", "email.*")  # the default: nothing
    observer.idle("ns", None)
    assert observer.claims == 3


def test_an_observer_without_a_hook_gets_the_default_for_it_and_keeps_its_own() -> None:
    observer = BeforeFlowControl()
    completed = with_defaults(observer)
    assert completed is not observer
    completed.held_back("ns", "email.*")
    completed.idle("ns", datetime(2030, 1, 1, tzinfo=UTC))
    completed.claimed("ns", 2, 0.1)
    completed.finished(None, Outcome.DONE)  # type: ignore[arg-type]  # not looked at
    assert observer.seen == ["claimed 2", "finished done"]


def test_an_observer_with_every_hook_is_used_as_it_is() -> None:
    class Full(BeforeFlowControl):
        def held_back(self, namespace: str, pattern: str) -> None:
            self.seen.append(f"held back {pattern}")

        def idle(self, namespace: str, next_due: datetime | None) -> None:
            self.seen.append("idle")

    observer = Full()
    assert with_defaults(observer) is observer
    with_defaults(observer).idle("ns", None)
    assert observer.seen == ["idle"]
