"""A schedule's occurrences as the materialiser makes them: each keyed by its nominal instant,
and run at its hashed instant within the schedule's run window, if it has one
(:func:`~duetime.timemath.run_window.hashed_instant` over the namespace, the key and the
nominal instant: the instant a timer with that window and key gets wherever it is made)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from duetime.model import Schedule
from duetime.model.schedules import DueSchedule, Occurrence
from duetime.timemath.run_window import hashed_instant


def occurrences_of(
    schedule: Schedule | DueSchedule,
    fire: Sequence[datetime],
    key: Callable[[str, datetime], str],
    namespace: str,
) -> tuple[Occurrence, ...]:
    """The occurrences at ``fire``, keyed by ``key`` (the materialiser's cached
    :func:`~duetime.schedules.occurrence_key`)."""
    window = schedule.run_window if isinstance(schedule, DueSchedule) else schedule.window
    if window is None:
        return tuple(Occurrence(key(schedule.name, instant), instant) for instant in fire)
    made = []
    for instant in fire:
        name = key(schedule.name, instant)
        made.append(Occurrence(name, instant, hashed_instant(namespace, name, instant, window)))
    return tuple(made)
