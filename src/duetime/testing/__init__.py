"""A kit for testing your own handlers: pin the clock, fire what is due, assert what is scheduled.

Tests never sleep. A harness swaps a :class:`~duetime.clock.FrozenClock` into the app, moves it
with :meth:`AsyncHarness.advance` / :meth:`AsyncHarness.travel_to`, and fires every timer due
at the pinned instant with :meth:`AsyncHarness.run_due` (the same claim → handler → record path
a worker runs, on the app's real database). :class:`Harness` is the same for the blocking
:class:`~duetime.app.sync.App`; :func:`make_app` builds an app on a throwaway SQLite file.

One idea per module: ``apps`` (building test apps), ``pinning`` (the frozen clock and its
moves), ``matching`` (what assertions match and how they fail), ``firing`` (what ``run_due``
reports) and ``harness`` (the two harnesses). Import from ``duetime.testing`` itself.
"""

from __future__ import annotations

from duetime.testing.apps import make_app, make_sync_app
from duetime.testing.firing import DEFAULT_MAX_ROUNDS as DEFAULT_MAX_ROUNDS
from duetime.testing.firing import Fired
from duetime.testing.harness import AsyncHarness, Harness, harness
from duetime.testing.matching import ANY_STATUS, PENDING, Match

__all__ = [
    "ANY_STATUS",
    "PENDING",
    "AsyncHarness",
    "Fired",
    "Harness",
    "Match",
    "harness",
    "make_app",
    "make_sync_app",
]
