"""Whether a row this worker claimed is still its own to start.

A claim gives the worker a lease until ``claimed + lease`` (database time); each heartbeat that
renews every lease it asked for pushes them all to ``heartbeat + lease``. A worker that was
paused (SIGSTOP, a long GC, swapped out) may come back holding rows whose lease ran out and
which another node has since rescued and started: it must not start them too. So before it
starts a row that waited (for a slot, or for the instant it was claimed ahead of), the worker
checks that the row's lease has at least a tenth of its length left, by the database's clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

MARGIN = 0.1
"""The share of a lease that must be left for a waiting row to start."""


@dataclass(frozen=True, slots=True)
class Held:
    """The lease of a claimed row: until when its claim made it this worker's, and the
    :attr:`Leases.generation` it was taken in."""

    lease_until: datetime
    generation: int
    start_by: datetime
    """``lease_until`` less the margin: before it, no renewal needs looking at."""


class Leases:
    """The leases this worker knows it holds: each claim's own, and the last full renewal."""

    def __init__(self, lease: timedelta) -> None:
        self.margin = lease * MARGIN
        self.generation = 0
        """Rows taken now carry this number; a heartbeat takes the next one (see :meth:`mark`)."""
        self._renewed_generation = 0
        self._renewed_until: datetime | None = None

    def mark(self) -> int:
        """A heartbeat is about to list the rows held: those taken so far are in its list."""
        self.generation += 1
        return self.generation

    def renewed(self, mark: int, until: datetime) -> None:
        """The heartbeat of ``mark`` renewed every lease it listed, until ``until``."""
        if mark > self._renewed_generation:
            self._renewed_generation, self._renewed_until = mark, until

    def held(self, lease_until: datetime) -> Held:
        """The lease of rows a claim just took until ``lease_until``."""
        return Held(lease_until, self.generation, lease_until - self.margin)

    def start_by(self, held: Held) -> datetime:
        """The instant before which a row held under ``held`` may start, as known now (a
        handler thread checks its start against it without reading this object)."""
        renewed = self._renewed_until
        if renewed is not None and held.generation < self._renewed_generation:
            return max(held.start_by, renewed - self.margin)
        return held.start_by

    def usable(self, held: Held, now: datetime) -> bool:
        """Whether a row held under ``held`` may start at ``now``."""
        if now < held.start_by:  # its claim's own lease still has the margin left
            return True
        renewed = self._renewed_until
        return (
            renewed is not None
            and held.generation < self._renewed_generation
            and now < renewed - self.margin
        )
