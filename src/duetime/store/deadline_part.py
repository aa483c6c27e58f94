"""The deadline watch's part of a store (``store.deadlines``): its protocol, beside the others
of :mod:`duetime.store.parts`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from duetime.model import Schedule
from duetime.model.deadlines import LastSuccess, Miss, RecordedMiss, ScheduleWatch, WatchStep
from duetime.timemath.recurrence.deadline import OccurrenceFacts


class DeadlineStore(Protocol):
    """The deadline watch of schedules (model/deadlines.py): its place and tallies in each
    watched schedule, the misses it found, and the fenced write of one round's judgement."""

    async def watched(self, namespace: str, after_id: int, limit: int) -> list[Schedule]:
        """A page of the schedules with a deadline or a pause setting (paused ones too), by
        id after ``after_id``, each with its :class:`ScheduleWatch` (None: not watched yet)."""
        ...

    async def watches(self, schedule_ids: Sequence[int]) -> dict[int, ScheduleWatch]:
        """The watch's rows of these schedules (those it has)."""
        ...

    async def occurrences(self, namespace: str, keys: Sequence[str]) -> dict[str, OccurrenceFacts]:
        """What the timers of these keys hold (a key without a timer is left out)."""
        ...

    async def record(self, steps: Sequence[WatchStep], now: datetime) -> list[list[Miss] | None]:
        """Write ``steps`` in one transaction, each step: the watch's row (only over its
        ``since``), each miss once with its ``schedule.missed`` event, a pause with its audit
        entry and event. For each step, the misses newly recorded; None where another round
        moved the row first (that step writes nothing)."""
        ...

    async def misses(
        self, namespace: str, schedule_id: int | None, limit: int
    ) -> list[RecordedMiss]:
        """The latest misses of the namespace (or of one schedule), newest first."""
        ...

    async def successes(self) -> list[LastSuccess]:
        """Every schedule with a deadline that has a watch row: its latest success in time."""
        ...
