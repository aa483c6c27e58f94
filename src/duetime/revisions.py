"""A stored schedule's next state when its definition changes, and a rule's next occurrences.

Revising a stored schedule (:func:`revise`) keeps the rules of its state machine in one place:

* ``after_at`` is the instant through which occurrences are handled; ``next_at`` is always
  ``next_after(rule, after_at)``, the first occurrence not yet materialised.
* A change of the rule (cron / every / timezone / start / end / DST options) starts afresh from
  *now*: occurrences of the new rule that already passed do not fire.
* Any other change keeps the sequence; occurrences materialised ahead of time (due after now,
  not fired yet) are *released* (deleted) and materialised again with the new fields.
* Pausing releases them too; resuming restarts from now (a paused period is not caught up).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from duetime.errors import InvalidInput
from duetime.model import Schedule
from duetime.schedules import (
    RULE_FIELDS,
    ScheduleRequest,
    anchor_for,
    first_after,
    parse_instant,
    recurrence_of,
)
from duetime.timemath.recurrence import occurrences, parse_recurrence
from duetime.timemath.recurrence.calendar import earliest_wall
from duetime.timemath.tzmath import to_utc

_TINY = timedelta(microseconds=1)


@dataclass(frozen=True, slots=True)
class Revision:
    """A stored schedule's next state, and from when its early timers must be released."""

    schedule: Schedule
    release_after: datetime | None
    changed: bool


def revise(
    current: Schedule,
    request: ScheduleRequest,
    now: datetime,
    default_max_attempts: int,
    max_payload_bytes: int,
) -> Revision:
    """Apply a full definition (``request``) to ``current``; see the module doc for the rules."""
    new = request.resolve(
        current.namespace, now, default_max_attempts, max_payload_bytes, allow_ended=True
    )
    rule = new.recurrence
    candidate = replace(
        current,
        type=new.type,
        payload=new.payload,
        subject=new.subject,
        cron=rule.cron,
        every=rule.every,
        timezone=rule.timezone,
        start_at=rule.start_at,
        end_at=rule.end_at,
        catch_up=new.catch_up,
        on_gap=rule.on_gap,
        on_overlap=rule.on_overlap,
        calendar=rule.calendar,
        max_attempts=new.max_attempts,
        active=new.active,
        overlap=new.overlap,
        catch_up_grace=new.catch_up_grace,
        must_succeed_within=new.must_succeed_within,
        pause_after_failures=new.pause_after_failures,
        window=new.window,
    )
    if candidate == current:
        return Revision(current, None, changed=False)
    rule_changed = any(getattr(candidate, name) != getattr(current, name) for name in RULE_FIELDS)
    resumed = candidate.active and not current.active
    release_after: datetime | None
    if rule_changed:
        after_at = release_after = now
    elif resumed:
        after_at, release_after = max(now, current.after_at), None
    else:
        after_at = release_after = min(now, current.after_at)
    anchor_at = current.anchor_at if candidate.every == current.every else anchor_for(now)
    revised = replace(
        candidate,
        anchor_at=anchor_at,
        after_at=after_at,
        watched_from=watched_from(current, candidate, now, rule_changed or resumed),
    )
    revised = replace(revised, next_at=first_after(recurrence_of(revised), anchor_at, after_at))
    return Revision(revised, release_after, changed=True)


def watched_from(
    current: Schedule, candidate: Schedule, now: datetime, restarted: bool
) -> datetime | None:
    """From when the deadline watch judges the revised schedule's occurrences: from now when it
    starts afresh (a new rule, a resume) or is first watched (a deadline or a pause setting
    given where there was none), else as before."""
    newly = (current.must_succeed_within is None and candidate.must_succeed_within is not None) or (
        current.pause_after_failures is None and candidate.pause_after_failures is not None
    )
    return now if restarted or newly else current.watched_from


def preview_occurrences(
    stored: Schedule | None,
    *,
    cron: str | None = None,
    every: str | int | float | timedelta | None = None,
    timezone: str = "UTC",
    on_gap: str = "run_after",
    on_overlap: str = "once",
    start_at: str | datetime | None = None,
    end_at: str | datetime | None = None,
    after: str | datetime | None = None,
    count: int = 5,
    now: datetime,
    rrule: str | None = None,
    calendar: dict[str, object] | None = None,
) -> list[datetime]:
    """The next ``count`` occurrences of a rule (or of ``stored``) after ``after``/now.

    A calendar rule without ``after`` lists from its DTSTART on (DTSTART itself included when
    it matches, as RFC 5545 counts it), so a finished rule lists what it had.
    """
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= 1000:
        raise InvalidInput("count", "must be a whole number from 1 to 1000")
    since = parse_instant(after, "after")
    if stored is not None:
        rule = recurrence_of(stored)
        if since is None:
            if stored.next_at is None:
                return []
            since = stored.next_at - _TINY
        return occurrences(rule, since, count)
    rule = parse_recurrence(
        cron=cron,
        every=every,
        timezone=timezone,
        on_gap=on_gap,
        on_overlap=on_overlap,
        start_at=parse_instant(start_at, "start_at"),
        end_at=parse_instant(end_at, "end_at"),
        now=now if since is None else since,
        rrule=rrule,
        calendar=calendar,
    )
    if since is None and rule.calendar is not None:
        since = to_utc(earliest_wall(rule.calendar), rule.zone, "earlier") - _TINY
    since = now if since is None else since
    if rule.every is not None and rule.start_at is None:
        rule = replace(rule, start_at=anchor_for(since))
    return occurrences(rule, since, count)
