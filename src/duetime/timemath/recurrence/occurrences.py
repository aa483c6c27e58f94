"""Occurrences of a :class:`Recurrence`: next, the next few, a bounded range, catch-up."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from cronsim import CronSim

from duetime.timemath.recurrence.budget import (
    MAX_STEPS,
    ExpansionBudget,
    bounded,
    costly_part,
    sized,
)
from duetime.timemath.recurrence.calendar import calendar_instants, drop_allowance
from duetime.timemath.recurrence.cost import span_after
from duetime.timemath.recurrence.cron import cron_instants
from duetime.timemath.recurrence.rule import CatchUpPolicy, Recurrence, parse_catch_up
from duetime.timemath.tzmath import is_aware

_TINY = timedelta(microseconds=1)


def iter_occurrences(
    rec: Recurrence,
    after: datetime,
    *,
    anchor: datetime | None = None,
    zone: ZoneInfo | None = None,
    budget: ExpansionBudget | None = None,
) -> Iterator[datetime]:
    """Occurrences strictly after ``after`` as UTC instants, increasing, until ``end_at``.

    Unbounded without ``end_at``; a cron rule stops only when it cannot fire for
    ``CRON_SEARCH_YEARS``, an RFC 5545 rule for ``RULE_SEARCH_YEARS``. An interval runs on
    ``start_at + k * every``; without ``start_at``, on ``anchor + k * every``; without either,
    on ``after + k * every``. ``zone`` reads the rule's
    zone with other rules than the installed tz data's (a newer release's, before it is used).

    All of it spends from ``budget`` (a fresh :func:`budget_for` the rule by default): a rule
    whose occurrences take too long to find raises :class:`~duetime.errors.RuleTooCostly`.
    """
    return bounded(
        _occurrences(rec, after, anchor, zone), budget_for(rec) if budget is None else budget
    )


def budget_for(rec: Recurrence, *, steps: int = MAX_STEPS) -> ExpansionBudget:
    """A fresh expansion budget whose refusal names the rule's field and its costly part; a
    calendar that skips non-business days is granted its drops besides (see
    :func:`~duetime.timemath.recurrence.calendar.drop_allowance`)."""
    if rec.calendar is not None:
        granted = steps + drop_allowance(rec.calendar)
        return sized(granted, "rrule", costly_part(rec.calendar.parts))
    return ExpansionBudget(steps=steps, field="cron" if rec.cron is not None else "every", part="")


def _occurrences(
    rec: Recurrence, after: datetime, anchor: datetime | None, zone: ZoneInfo | None
) -> Iterator[datetime]:
    after = _utc(after, "after")
    if rec.start_at is not None and after < rec.start_at:
        after = rec.start_at - _TINY  # start_at itself is an occurrence when it matches
    if rec.calendar is not None:
        rules = zone or rec.zone
        source = calendar_instants(rec.calendar, rules, after, rec.on_gap, rec.on_overlap)
    elif rec.cron is not None:
        rules = zone or rec.zone
        source = cron_instants(rec.expression, rules, after, rec.on_gap, rec.on_overlap)
    else:
        source = _interval_instants(rec, after, anchor)
    for instant in source:
        if rec.end_at is not None and instant > rec.end_at:
            return
        yield instant


def next_after(
    rec: Recurrence,
    after: datetime,
    *,
    anchor: datetime | None = None,
    zone: ZoneInfo | None = None,
    budget: ExpansionBudget | None = None,
) -> datetime | None:
    """The first occurrence strictly after ``after`` (UTC), or None when there is none."""
    return next(iter_occurrences(rec, after, anchor=anchor, zone=zone, budget=budget), None)


def occurrences(
    rec: Recurrence,
    after: datetime,
    count: int,
    *,
    anchor: datetime | None = None,
    budget: ExpansionBudget | None = None,
) -> list[datetime]:
    """The next ``count`` occurrences strictly after ``after`` (fewer if the rule ends), within
    a century of ``after``: the span the check at a rule's creation looks ahead, so an accepted
    rule's preview stays within the work that check allowed (a rule firing once in decades,
    ``FREQ=DAILY;BYMONTH=2;BYMONTHDAY=-1;BYDAY=MO``, lists those of the century)."""
    if count < 0:
        raise ValueError("count must not be negative")
    found: list[datetime] = []
    if count == 0:
        return found
    limit = span_after(after)
    for instant in iter_occurrences(rec, after, anchor=anchor, budget=budget):
        if instant > limit:
            break
        found.append(instant)
        if len(found) == count:
            break
    return found


def occurrences_between(
    rec: Recurrence, after: datetime, until: datetime, *, anchor: datetime | None = None
) -> Iterator[datetime]:
    """Occurrences in ``(after, until]``, increasing."""
    until = _utc(until, "until")
    for instant in iter_occurrences(rec, after, anchor=anchor):
        if instant > until:
            return
        yield instant


def catch_up_due(
    rec: Recurrence,
    last_fired_or_anchor: datetime,
    now: datetime,
    policy: CatchUpPolicy,
    limit: int = 1000,
) -> tuple[list[datetime], datetime | None]:
    """What to fire now for the occurrences missed in ``(last_fired_or_anchor, now]``; what next.

    ``latest`` fires only the most recent missed occurrence, ``all`` every one (oldest first),
    ``none`` none of them. The second item is the next occurrence after ``now``, except when
    ``all`` reaches ``limit``: then it is the first missed occurrence left out (``<= now``),
    which reports the cap; call again with the last one returned to continue. An interval
    without ``start_at`` runs on the grid of ``last_fired_or_anchor``.
    """
    policy = parse_catch_up(policy, "policy")
    if limit < 1:
        raise ValueError("limit must be at least 1")
    last = _utc(last_fired_or_anchor, "last_fired_or_anchor")
    now = _utc(now, "now")
    upcoming = next_after(rec, max(last, now), anchor=last)
    if policy == "none" or now <= last:
        return [], upcoming
    if policy == "latest":
        latest = _latest_in(rec, last, now)
        return ([latest] if latest is not None else []), upcoming
    due: list[datetime] = []
    for instant in occurrences_between(rec, last, now, anchor=last):
        if len(due) == limit:
            return due, instant
        due.append(instant)
    return due, upcoming


def _latest_in(rec: Recurrence, after: datetime, until: datetime) -> datetime | None:
    """The last occurrence in ``(after, until]`` without walking every one before it."""
    if rec.every is not None:
        base = rec.start_at or after
        if rec.end_at is not None:
            until = min(until, rec.end_at)
        if until < base:
            return None
        candidate = base + ((until - base) // rec.every) * rec.every
        return candidate if candidate > after else None
    # Cron: look back through growing windows; each is a short walk forward.
    window = timedelta(hours=1)
    while True:
        low = after if window >= until - after else until - window
        found = None
        for instant in occurrences_between(rec, low, until):
            found = instant
        if found is not None or low == after:
            return found
        window *= 8


def _interval_instants(
    rec: Recurrence, after: datetime, anchor: datetime | None
) -> Iterator[datetime]:
    step = rec.every
    assert step is not None
    base = rec.start_at or (_utc(anchor, "anchor") if anchor is not None else after)
    k = 0 if after < base else (after - base) // step + 1
    try:
        instant = base + k * step
        while True:
            yield instant
            instant += step
    except OverflowError:
        return


def _utc(value: datetime, name: str) -> datetime:
    if not isinstance(value, datetime) or not is_aware(value):
        raise ValueError(f"{name} must be a timezone-aware datetime")
    return value.astimezone(UTC)


def describe(rec: Recurrence) -> str:
    """A short human summary, e.g. 'At 02:30 every day (America/New_York)'."""
    if rec.every is not None:
        text = f"Every {_span(rec.every)} of real time"
    elif rec.calendar is not None:
        text = f"RRULE {rec.calendar.rrule} from {rec.calendar.dtstart.isoformat()}"
        text += f" ({rec.timezone})"
    else:
        try:
            text = CronSim(rec.expression, datetime(2000, 1, 1)).explain()
        except Exception:  # explain() is best-effort prose; the rule itself is valid
            text = rec.expression
        text += f" ({rec.timezone})"
        if rec.fixed_time and (rec.on_gap, rec.on_overlap) != ("run_after", "once"):
            gap = "skipped" if rec.on_gap == "skip" else "run after"
            text += f"; in a DST gap: {gap}; in a repeated hour: {rec.on_overlap}"
    if rec.start_at is not None:
        text += f", from {rec.start_at.isoformat()}"
    if rec.end_at is not None:
        text += f", until {rec.end_at.isoformat()}"
    return text


def _span(step: timedelta) -> str:
    seconds = step.total_seconds()
    parts = []
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        amount, seconds = divmod(seconds, size)
        if amount:
            parts.append(f"{int(amount)} {unit}" + ("s" if amount != 1 else ""))
    if seconds:
        parts.append(f"{seconds:g} second" + ("s" if seconds != 1 else ""))
    return " ".join(parts)
