"""What both stores share of run windows: a new timer's chosen instant, the write's columns,
and the groups an even spread is computed over (``store.spreads``).

A timer with a window is written with ``run_at`` at its hashed instant
(:func:`~duetime.timemath.run_window.hashed_instant`), ``spread`` included: so an evenly spread
timer is already within its window, near its place, before its group's spread is computed, and
stays there should that never happen. The spread itself is one set-based UPDATE a group
(:class:`SpreadStore`), in the database, so its result depends on the group's rows alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from duetime.model import NewTimer
from duetime.timemath.run_window import hashed_offset


def run_instant(timer: NewTimer, key: str) -> datetime:
    """When a new timer's first attempt runs: its due instant, or its hashed instant within
    its window (under ``key``, the key it is stored with)."""
    if timer.window is None:
        return timer.due_at
    if timer.run_at is not None:  # placed before the write (an even group)
        return timer.run_at
    return timer.due_at + hashed_offset(timer.namespace, key, timer.due_at, timer.window)


def window_params(timers: Sequence[NewTimer], keys: Sequence[str]) -> dict[str, list[Any]]:
    """PostgreSQL's batch columns of the windows: empty (NULL throughout, nothing sent) when
    no timer of the batch has one, the common case."""
    if all(timer.window is None for timer in timers):
        return {"run_offsets": [], "run_windows": [], "spreads": []}
    return {
        "run_offsets": [
            None if t.window is None else run_instant(t, key) - t.due_at
            for t, key in zip(timers, keys, strict=True)
        ],
        "run_windows": [t.window for t in timers],
        "spreads": [t.spread for t in timers],
    }


@dataclass(frozen=True, slots=True)
class SpreadGroup:
    """The timers spread evenly together: one namespace, type, nominal instant and window."""

    namespace: str
    type: str
    due_at: datetime
    window: timedelta


def spread_groups(timers: Iterable[NewTimer]) -> list[SpreadGroup]:
    """The groups a batch touches whose spread is ``even``, each once, in first-seen order."""
    groups = {
        SpreadGroup(t.namespace, t.type, t.due_at, t.window): None
        for t in timers
        if t.spread == "even" and t.window is not None
    }
    return list(groups)


class SpreadStore(Protocol):
    """``store.spreads``: the even spread of groups of timers, computed in the database."""

    async def spread(self, groups: Sequence[SpreadGroup]) -> int:
        """Spread each group's pending, never-claimed rows (status ``scheduled``, no attempt)
        evenly over its window, ranked by key: the ``rank``-th of ``total`` runs at
        ``due_at + floor(rank * window_us / total)`` µs
        (:func:`~duetime.timemath.run_window.even_offset`). One UPDATE a group, in one
        transaction; it answers how many rows it moved."""
        ...

    async def group_size(self, group: SpreadGroup) -> int:
        """How many pending timers ``group`` holds (spread evenly or not)."""
        ...
