"""Why a cancel, a replay, a run-now or a delete changed no row: the same answer on every
backend.

Each is one fenced statement (``cancel`` takes only a scheduled timer, ``replay`` only a dead
one, ``delete`` only a finished one); when it changes nothing, the timer's row — or its
absence — says why.
"""

from __future__ import annotations

from typing import Literal

from duetime.errors import Conflict, DuetimeError, NotFound
from duetime.model import BulkAction

Transition = Literal["cancel", "replay", "run_now", "delete"]

_NEEDS = {
    "cancel": ("scheduled", "cancelled"),
    "replay": ("dead", "replayed"),
    "run_now": ("scheduled or retrying", "made due now"),
    "delete": ("finished (done, dead, cancelled or expired)", "deleted"),
}
"""The status each transition takes a timer from, and what it calls the timer after."""


def refused(transition: Transition, key: str, status: str | None) -> DuetimeError:
    """NotFound for an unknown key (``status`` None), else Conflict naming its status."""
    if status is None:
        return NotFound(f"no timer with key {key!r}", field="key")
    needed, done = _NEEDS[transition]
    advice = ""
    if transition == "delete":  # what to do instead, so the operator's next step is plain
        advice = "; cancel it first" if status in ("scheduled", "retrying") else "; let it finish"
    return Conflict(
        f"timer {key!r} is {status}: only a {needed} timer can be {done}{advice}", field="key"
    )


ACTS_ON: dict[BulkAction, tuple[str, ...]] = {
    "cancel": ("scheduled", "retrying"),
    "replay": ("dead",),
    "run_now": ("scheduled", "retrying"),
    "delete": ("done", "dead", "cancelled", "expired"),
}
"""The statuses a bulk action takes a timer from (the single transitions' rule)."""
