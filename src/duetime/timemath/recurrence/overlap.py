"""A schedule's overlap policy and catch-up grace: pure decisions, no storage.

Temporal's ScheduleOverlapPolicy, for an occurrence that falls due while an earlier occurrence
of the same schedule is still unfinished (scheduled and not started yet, running, or waiting
for a retry — in flight until it ends as done, dead, cancelled or expired):

* ``allow`` (the default): it fires anyway, as every occurrence always did.
* ``skip``: it does not fire; it is recorded as skipped, with the reason, and the schedule
  goes on.
* ``buffer_one``: it waits and fires as soon as the unfinished one ends; at most one waits, so
  a further occurrence while one is buffered is skipped.

Occurrences are made ahead of their instant, as every schedule's are, so that they are claimed
ahead and start on time. One made ahead behind an unfinished occurrence *waits*: the earlier
one's end decides its fate (the stores' release trigger) — ended before the instant, it fires at
its instant; ended after, it is skipped or was buffered, as it would have been at that instant.

The catch-up grace is how late an occurrence may be and still simply fire late; past it, the
schedule's ``catch_up`` policy decides.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Literal, get_args

from duetime.errors import InvalidInput
from duetime.timemath.durations import parse_span
from duetime.timemath.recurrence.rule import _choice

OverlapPolicy = Literal["allow", "skip", "buffer_one"]
OVERLAP: tuple[OverlapPolicy, ...] = get_args(OverlapPolicy)

DEFAULT_CATCH_UP_GRACE = timedelta(seconds=60)
MAX_CATCH_UP_GRACE = timedelta(days=31)
"""A month: enough for a monthly schedule to fire a late occurrence; a longer outage is one."""


class Fate(enum.StrEnum):
    """What becomes of one occurrence that falls due."""

    FIRE = "fire"
    BUFFER = "buffer"
    SKIP = "skip"
    WAIT = "wait"
    """Not due yet, behind an unfinished occurrence: the end of that one decides."""


SKIPPED_RUNNING = "skipped: an earlier occurrence was still unfinished (overlap=skip)"
SKIPPED_BUFFER_FULL = (
    "skipped: an earlier occurrence was still unfinished and one was already buffered "
    "(overlap=buffer_one)"
)
BUFFERED = "buffered: fires when the earlier occurrence finishes (overlap=buffer_one)"
WAITING = (
    "waiting: fires at its instant if the earlier occurrence has finished by then, else {fate} "
    "(overlap={policy})"
)


def waiting(policy: str) -> str:
    """The reason a waiting occurrence shows until the earlier one's end decides its fate."""
    fate = "is buffered" if policy == "buffer_one" else "is skipped"
    return WAITING.format(fate=fate, policy=policy)


def parse_overlap(value: object, field: str = "overlap") -> OverlapPolicy:
    """Check an overlap policy name: ``allow``, ``skip`` or ``buffer_one``."""
    return _choice(value, OVERLAP, field)


def parse_catch_up_grace(value: object, field: str = "catch_up_grace") -> timedelta:
    """A grace in real time: ISO 8601 (``PT5M``), seconds or a timedelta; 0 to 31 days."""
    if type(value) is timedelta and timedelta(0) <= value <= MAX_CATCH_UP_GRACE:
        return value  # the default, and every schedule read back: nothing to parse
    if (
        value is None
        or isinstance(value, bool)
        or not isinstance(value, str | int | float | timedelta)
    ):
        raise InvalidInput(
            field, "must be an ISO 8601 duration such as 'PT5M' or a number of seconds"
        )
    if isinstance(value, int | float) and value < 0:
        raise InvalidInput(field, f"must not be negative, not {value!r}")
    if isinstance(value, timedelta) and value < timedelta(0):
        raise InvalidInput(field, "must not be negative")
    grace = parse_span(value, field)
    if grace > MAX_CATCH_UP_GRACE:
        raise InvalidInput(field, f"must be at most {MAX_CATCH_UP_GRACE.days} days")
    return grace


def gated(policy: str) -> bool:
    """True when occurrences wait for the state of earlier ones (anything but ``allow``)."""
    return policy != "allow"


def decide(
    policy: OverlapPolicy,
    due: Sequence[datetime],
    unfinished: bool,
    buffered: bool,
    now: datetime | None = None,
) -> list[Fate]:
    """The fate of each occurrence of ``due`` (oldest first), as far as it is known at ``now``
    (None: all of them fall due now).

    ``unfinished``: an earlier occurrence has not finished; ``buffered``: one already waits for
    it. An occurrence that fires is itself unfinished for the ones after it. One that is not
    due yet behind an unfinished one waits: whether that one ends before its instant is not
    known yet.
    """
    fates: list[Fate] = []
    for instant in due:
        if policy == "allow" or not unfinished:
            fates.append(Fate.FIRE)
            unfinished = True
        elif now is not None and instant > now:
            fates.append(Fate.WAIT)
        elif policy == "buffer_one" and not buffered:
            fates.append(Fate.BUFFER)
            buffered = True
        else:
            fates.append(Fate.SKIP)
    return fates
