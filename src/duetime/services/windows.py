"""Windows of schedule ids: how the materialiser walks a backlog in the table's order.

A backlog (a day's million birthdays, or everything due while every worker was down) lies all
over the schedules table and its indexes when taken earliest first: each row of a batch on a
page of its own, its new version and index entries written next to nobody's. Taken as windows
of consecutive ids instead, a batch's rows share their pages, so the server reads and writes
fewer of them.

That pays only while most of the ids walked are due: ids of schedules not due (other
namespaces, later occurrences, paused ones) are read for nothing. So the windows widen as the
due rows thin out, up to :data:`WIDEST` times the rows wanted, and stop once fewer than
:data:`DENSEST` of the ids walked were due; the materialiser then goes on earliest first.
"""

from __future__ import annotations

DENSEST = 0.25
"""Below this share of due rows among the ids walked (after the first few windows), walking
costs more than it saves: the windows stop."""

WIDEST = 4
"""A window spans at most this many times the rows wanted (at DENSEST: about those rows)."""

SETTLE = 8
"""Windows walked before their density is trusted enough to stop them."""


class Windows:
    """Hands out consecutive ranges of ids, one per materialising transaction, sized so each
    holds about ``rows`` due rows; shared by the lanes of one backlog (one event loop)."""

    __slots__ = ("_found", "_next", "_rows", "_size", "_stop", "_taken", "_walked", "sparse")

    def __init__(self, ids: range, rows: int) -> None:
        if rows < 1:
            raise ValueError("rows must be at least 1")
        self._next = ids.start
        self._stop = ids.stop
        self._rows = rows
        self._size = rows
        self._walked = 0
        self._found = 0
        self._taken = 0
        self.sparse = False
        """True once the due rows were found too thin for windows to pay."""

    def take(self) -> range | None:
        """The next window, or None: every id walked, or the due rows too thin."""
        if self.sparse or self._next >= self._stop:
            return None
        window = range(self._next, min(self._stop, self._next + self._size))
        self._next = window.stop
        self._taken += 1
        return window

    def found(self, window: range, due: int) -> None:
        """How many due rows ``window`` held: the next windows are sized by it."""
        self._walked += len(window)
        self._found += due
        density = self._found / self._walked
        if self._taken >= SETTLE and density < DENSEST:
            self.sparse = True
            return
        self._size = max(
            self._rows, min(WIDEST * self._rows, round(self._rows / max(density, 1e-9)))
        )
