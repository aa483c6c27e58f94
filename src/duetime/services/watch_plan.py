"""What one round of the deadline watch judges of one schedule, and what it writes: pure.

A schedule's occurrences are judged in order, each once its deadline (nominal instant plus
``must_succeed_within``) has passed, from where the watch left it (``checked_through``), or from
when the schedule was first watched (``watched_from``, else its creation: a schedule restarted
by a resume or a new rule is judged afresh from then, its tally of failures reset). Without a
deadline (only ``pause_after_failures``), an occurrence is judged once it has ended.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timedelta

from duetime.model import Schedule
from duetime.model.deadlines import Miss, ScheduleWatch, WatchStep, seconds
from duetime.schedules import occurrence_key, recurrence_of
from duetime.timemath.recurrence import occurrences_between
from duetime.timemath.recurrence.deadline import OccurrenceFacts, Verdict, judge

PER_ROUND = 100
"""Occurrences of one schedule judged in a round at most (a long outage: the next rounds go on)."""


def judged_from(schedule: Schedule) -> tuple[datetime, ScheduleWatch | None]:
    """The instant after which occurrences are still to judge, and the watch it continues
    (None: a fresh start, from ``watched_from`` or the schedule's creation)."""
    start = schedule.watched_from or schedule.created_at
    watch = schedule.watch
    if watch is not None and watch.checked_through >= start:
        return watch.checked_through, watch
    return start, None


def candidates(schedule: Schedule, now: datetime) -> list[datetime]:
    """The nominal instants this round may judge: after the watch's place, with their deadline
    passed (without a deadline: up to now), at most :data:`PER_ROUND`. None for a paused
    schedule: a resume starts it afresh."""
    if not schedule.active:
        return []
    after, _ = judged_from(schedule)
    until = now - (schedule.must_succeed_within or _ZERO)
    if until <= after:
        return []
    found: list[datetime] = []
    for instant in occurrences_between(recurrence_of(schedule), after, until):
        found.append(instant)
        if len(found) == PER_ROUND:
            break
    return found


def plan_step(
    schedule: Schedule,
    instants: list[datetime],
    facts: Mapping[str, OccurrenceFacts],
    now: datetime,
    max_attempts: int,
) -> WatchStep | None:
    """The step that records this round's verdicts on ``instants`` (None: nothing decided)."""
    after, watch = judged_from(schedule)
    since = None if schedule.watch is None else schedule.watch.checked_through
    tally = watch or ScheduleWatch(checked_through=after)
    if watch is None and schedule.watch is not None:  # restarted: counted afresh
        tally = replace(schedule.watch, checked_through=after, failures_in_row=0)
    deadline = schedule.must_succeed_within
    misses: list[Miss] = []
    pause = False
    judged = None
    for instant in instants:
        fact = facts.get(occurrence_key(schedule.name, instant), _NONE)
        verdict, reason = judge(fact, instant, deadline, schedule.after_at)
        if verdict is Verdict.WAIT:
            break
        judged = instant
        if verdict is Verdict.SUCCESS:
            tally = replace(tally, failures_in_row=0, last_success_at=fact.completed_at or now)
        elif verdict is not Verdict.PASS:
            tally = replace(tally, failures_in_row=tally.failures_in_row + 1)
            if verdict is Verdict.MISS:
                assert deadline is not None
                assert reason is not None
                misses.append(Miss(instant, reason.value, instant + deadline))
                tally = replace(
                    tally,
                    misses=tally.misses + 1,
                    last_miss_at=instant,
                    last_miss_reason=reason.value,
                )
            limit = schedule.pause_after_failures
            pause = pause or (limit is not None and tally.failures_in_row >= limit)
    if judged is None:
        return None
    return WatchStep(
        schedule_id=schedule.id,
        namespace=schedule.namespace,
        name=schedule.name,
        since=since,
        watch=replace(tally, checked_through=judged),
        misses=tuple(misses),
        pause=pause,
        max_attempts=max_attempts,
        release_after=now,
        details={
            "must_succeed_within": seconds(deadline),
            "pause_after_failures": schedule.pause_after_failures,
        },
    )


_ZERO = timedelta(0)
_NONE = OccurrenceFacts(None)
