"""Flexible run windows: the instant within ``[due, due + window]`` a timer runs at.

A timer with a window keeps its nominal due instant (its key, its history) and runs at a chosen
instant inside the window. Two ways of choosing, both pure functions of stored values, so every
worker, every restart and every replay agrees:

* **hashed** (the default): ``offset = floor(h * window_us / 2**64)`` microseconds, where ``h``
  is the first 8 bytes, big-endian, of SHA-256 over ``namespace``, ``key`` and the nominal
  instant (ISO 8601, UTC, microseconds) joined by NUL. The offset is in ``[0, window)``, so
  the instant is never before due and never after due + window.
* **even**: the ``total`` timers of one group (namespace, type, nominal instant, window),
  ranked by key from 0, run at ``due + floor(rank * window_us / total)`` microseconds: exactly
  ``window / total`` apart. The store computes it in SQL with the same integer arithmetic
  (:func:`even_offset` is its reference).
"""

from __future__ import annotations

import hashlib
import itertools
from datetime import UTC, datetime, timedelta

from duetime.errors import InvalidInput

SPREADS = ("hash", "even")
"""How a window's instant is chosen: by a stable hash (the default) or evenly over a group."""
_MICRO = timedelta(microseconds=1)
_TWO_64 = 1 << 64


def window_micros(window: timedelta) -> int:
    """A window in whole microseconds (timedelta holds nothing finer)."""
    return window // _MICRO


def hash_fraction(namespace: str, key: str, due_at: datetime) -> int:
    """A stable 64-bit number of (namespace, key, nominal instant): the same on every machine
    and Python (SHA-256, not ``hash()``, which is salted a process)."""
    nominal = due_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    digest = hashlib.sha256(f"{namespace}\0{key}\0{nominal}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def hashed_offset(namespace: str, key: str, due_at: datetime, window: timedelta) -> timedelta:
    """The hashed offset into ``window``: in ``[0, window)``, ``0`` for an empty window."""
    span = window_micros(window)
    return timedelta(microseconds=hash_fraction(namespace, key, due_at) * span // _TWO_64)


def hashed_instant(namespace: str, key: str, due_at: datetime, window: timedelta) -> datetime:
    """The instant a timer with a hashed window runs at."""
    return due_at + hashed_offset(namespace, key, due_at, window)


def even_offset(rank: int, total: int, window: timedelta) -> timedelta:
    """The offset of the ``rank``-th (from 0) of ``total`` timers spread evenly over
    ``window``: ``floor(rank * window_us / total)`` microseconds, in ``[0, window)``."""
    if total < 1 or not 0 <= rank < total:
        raise ValueError(f"rank {rank} is not within a group of {total}")
    return timedelta(microseconds=rank * window_micros(window) // total)


def check_window(window: timedelta, field: str = "window") -> timedelta:
    """A window is a positive duration."""
    if window <= timedelta(0):
        raise InvalidInput(field, "must be a positive duration, e.g. PT15M")
    return window


def check_spread(spread: str, field: str = "spread") -> str:
    if spread not in SPREADS:
        raise InvalidInput(field, f"must be one of {', '.join(SPREADS)}")
    return spread


def check_window_within(window: timedelta, period: timedelta, field: str = "window") -> None:
    """A schedule's window may not be longer than its shortest gap between occurrences, or
    one occurrence's run could come after the next one's."""
    if window > period:
        raise InvalidInput(
            field, f"is longer than the schedule's period ({period}); it must be at most that"
        )


def burst_rate(total: int, window: timedelta) -> float:
    """Timers a second that a group of ``total`` spread over ``window`` asks for."""
    seconds = window.total_seconds()
    return float("inf") if seconds <= 0 else total / seconds


def window_holds(
    total: int, window: timedelta, rate_count: int, period: timedelta, burst: int
) -> bool:
    """Whether ``total`` starts fit in ``window`` at a rate of ``rate_count`` a ``period`` with
    ``burst`` at once: a smooth rate grants at most ``burst + window * rate`` in a window."""
    return total <= burst + window / period * rate_count


PERIOD_SAMPLE = 50
"""Occurrences of a schedule's rule whose gaps bound its window (a rule's period may vary: a
month, a weekday rule's weekend)."""


def shortest_gap(instants: list[datetime]) -> timedelta | None:
    """The shortest gap between consecutive ``instants`` (None: fewer than two)."""
    gaps = [later - earlier for earlier, later in itertools.pairwise(instants)]
    return min(gaps, default=None)
