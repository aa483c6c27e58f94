"""A calendar rule is accepted only if what will be asked of it stays well within budget.

The checks at creation expand the rule as a preview would: its first occurrences from DTSTART
(what a preview without ``after`` lists) and from the moment it is made (what the materialiser
asks first), those within a century, and, for a rule with COUNT, every one of its occurrences
(a rule with COUNT is always expanded from DTSTART, so the last is the dearest it can ever
be). Each may take only a share of the budget
(:data:`~duetime.timemath.recurrence.budget.CREATION_SHARE`), so a rule accepted now does not
run out of budget when asked again later; a rule that skips non-business days is granted its
drops whole besides, as every expansion of it is.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from duetime.timemath.recurrence.budget import bounded, costly_part, creation_budget
from duetime.timemath.recurrence.calendar import (
    Calendar,
    calendar_instants,
    drop_allowance,
    rule_walls,
)
from duetime.timemath.recurrence.day_filter import RULE_SEARCH_YEARS
from duetime.timemath.tzmath import to_utc

PROBE = 100
"""Occurrences a rule must yield within its share of the budget: a preview's worth."""
SPAN = timedelta(days=366 * RULE_SEARCH_YEARS)
"""A probe stops a century after it starts if its PROBE occurrences lie further: a yearly rule
on 29 February has 25 in a century, and its hundredth lies four centuries on (a walk of every
day between). A preview stops there too (:func:`~duetime.timemath.recurrence.occurrences.
occurrences`), so an accepted rule's preview costs no more than the check that accepted it."""
_TINY = timedelta(microseconds=1)


def check_calendar_cost(
    calendar: Calendar, zone: ZoneInfo, now: datetime, on_gap: str, on_overlap: str
) -> None:
    """Raise :class:`~duetime.errors.RuleTooCostly` for a rule too costly to expand."""
    part = costly_part(calendar.parts)
    extra = drop_allowance(calendar)
    if calendar.parts.count is not None:
        _drain(bounded(rule_walls(calendar), creation_budget("rrule", part, extra)))
    first = to_utc(calendar.dtstart, zone, "earlier") - _TINY
    for after in (first, now.astimezone(UTC)):
        instants = calendar_instants(calendar, zone, after, on_gap, on_overlap)
        probe = itertools.islice(bounded(instants, creation_budget("rrule", part, extra)), PROBE)
        _drain(itertools.takewhile(_before(span_after(after)), probe))


def _before(limit: datetime) -> Callable[[datetime], bool]:
    return lambda instant: instant <= limit


def span_after(after: datetime) -> datetime:
    """``after`` plus :data:`SPAN`: where a probe, or a preview, stops looking."""
    try:
        return after + SPAN
    except OverflowError:
        return datetime.max.replace(tzinfo=UTC)


def _drain(items: Iterator[datetime]) -> None:
    for _ in items:
        pass
