"""Which way the PostgreSQL store writes a batch of timers, from the batch's shape alone.

:func:`plan_put` is pure: it reads the callers' timers (their keys, how many, the conflict rule)
and names a :class:`Strategy`; :mod:`.writes` carries it out. One caller's ``put_timers``, or
several callers' that share a commit (:mod:`.grouping`), are a sequence of :class:`PutCall`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from enum import Enum
from typing import NamedTuple

from duetime.model import NewTimer, OnConflict

PUT_CHUNK = 100
"""Timers a statement of ``put_timers``: small enough that the client validates and encodes the
next chunk while the server writes this one, large enough that a statement's own cost is small
(``bench/enqueue_probe.py``). A batch larger than this has a transaction of its own."""


class PutCall(NamedTuple):
    """One caller's ``put_timers`` of at most :data:`PUT_CHUNK` timers."""

    timers: list[NewTimer]
    on_conflict: OnConflict
    now: datetime


class Strategy(Enum):
    """How a batch is written (see :class:`~duetime.store.postgres.writes.TimerWrites`)."""

    FRESH = "fresh"
    """Every key drawn by the store: one insert and its NOTIFY in one round trip."""
    AT_ONCE = "at_once"
    """Every key given, none twice: the statements as one implicit transaction."""
    APART = "apart"
    """One caller's timers in a transaction of their own, chunked in a pipeline."""
    GROUPED = "grouped"
    """Several callers in one transaction, each kind of statement in a savepoint."""


def plan_put(calls: Sequence[PutCall]) -> Strategy:
    """The strategy for ``calls``: one caller's, or several sharing a commit."""
    if drawn_keys_only(calls) and total_timers(calls) <= PUT_CHUNK:
        return Strategy.FRESH
    if at_once(calls):
        return Strategy.AT_ONCE
    return Strategy.APART if len(calls) == 1 else Strategy.GROUPED


def total_timers(calls: Sequence[PutCall]) -> int:
    return sum(len(call.timers) for call in calls)


def drawn_keys_only(calls: Sequence[PutCall]) -> bool:
    """Every timer of these calls has a key the store draws (none given)."""
    return all(call.timers and all(t.key is None for t in call.timers) for call in calls)


def at_once(calls: Sequence[PutCall]) -> bool:
    """Whether :attr:`Strategy.AT_ONCE` can write these calls: every timer has a key of its
    own, no key twice, up to PUT_CHUNK in all, and a call of several timers only with ``keep``
    (its timers then stand or fall alone: nothing to undo after the commit)."""
    seen: set[tuple[str, str]] = set()
    total = 0
    for call in calls:
        if not call.timers or (call.on_conflict != "keep" and len(call.timers) != 1):
            return False
        for timer in call.timers:
            if timer.key is None or (timer.namespace, timer.key) in seen:
                return False
            seen.add((timer.namespace, timer.key))
        total += len(call.timers)
    return total <= PUT_CHUNK


def spans(calls: Sequence[PutCall]) -> list[range]:
    """Each call's positions among the timers of all of them, in order."""
    found: list[range] = []
    start = 0
    for call in calls:
        found.append(range(start, start + len(call.timers)))
        start += len(call.timers)
    return found
