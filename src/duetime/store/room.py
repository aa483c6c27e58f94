"""The caps a store keeps when it creates: namespaces, tokens, schedules (limit rules:
:func:`duetime.store.flow_grants.check_room`).

A capped creation counts and inserts in one transaction that first takes a lock every other
capped creation of the same collection takes too, so creations racing for the last place run
one after the other and the second sees the first's row: PostgreSQL takes an advisory lock
(namespaces, tokens: one per schema) or locks the namespace's row (a namespace's schedules and
rules), and counts in a later statement than the lock, whose snapshot is taken once the lock is
held; SQLite's write transactions take its write lock before they read anything.

Counts stop at the cap (``LIMIT``), so checking costs what the cap allows, however many rows a
collection grew to before its cap was lowered.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from duetime.errors import CapReached


def check_namespace_room(held: int, new: int, cap: int, field: str) -> None:
    """``new`` namespaces more than the ``held`` ones (counted up to ``cap``) must stay within
    ``cap``: CapReached naming ``field`` otherwise."""
    if new and held + new > cap:
        raise CapReached(field, "this database", "namespaces", cap, "max_namespaces")


def tokens_full(cap: int) -> CapReached:
    """One more active token would pass ``cap``."""
    return CapReached("token", "this database", "active tokens", cap, "max_tokens")


@dataclass(frozen=True, slots=True)
class ScheduleRoom:
    """What ``put_schedules`` checks in its transaction: the new ones among ``names`` must
    leave ``namespace`` within ``cap`` schedules."""

    namespace: str
    names: Sequence[str]
    cap: int

    def check(self, held: int, present: int) -> None:
        """``held``: the namespace's schedules, counted up to the cap; ``present``: how many of
        ``names`` exist. CapReached naming ``name`` when the new ones do not fit (the caller's
        transaction then stores nothing)."""
        if held + len(self.names) - present > self.cap:
            where = f"namespace {self.namespace!r}"
            raise CapReached("name", where, "schedules", self.cap, "max_schedules")
