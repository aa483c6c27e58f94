"""A schedule's backfill: the occurrences its rule had in a past range, made as timers.

Each occurrence is the timer the materialiser would have made — the schedule's type,
payload, subject, attempts and run window, keyed by its nominal instant
(:func:`~duetime.schedules.occurrence_key`) — written with ``on_conflict="keep"``, so a key
already stored (an occurrence made, pending, run or cancelled, or backfilled before) is left
as it is: a backfill twice creates nothing
twice, and what ran is not repeated. The instants come from the schedule's own expansion
(:func:`~duetime.timemath.recurrence.occurrences.occurrences_between`: cron, interval or RFC
5545 rule with its calendar). The timers are due in the past, so workers claim them at once,
through flow control as any due timer: the type's limits pace them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from datetime import datetime, timedelta
from itertools import islice

from duetime.app.audit import Audit
from duetime.app.context import AppContext
from duetime.app.scheduling import TimerWrites
from duetime.errors import InvalidInput
from duetime.model import NewTimer, Schedule
from duetime.model.audit import Actor
from duetime.model.backfill import Backfill, BackfillOccurrence
from duetime.schedules import check_schedule_name, occurrence_key, parse_instant, recurrence_of
from duetime.timemath.recurrence.occurrences import occurrences_between

CONFIRM_ABOVE = 10_000
"""A backfill of more occurrences than this needs ``yes=True`` (``--yes``)."""
MOST = 1_000_000
"""The most occurrences one backfill makes, ``yes`` or not."""
BATCH = 10_000
"""Timers written a transaction."""
EXPANSION = 1_000
"""Occurrences found by one expansion, which spends one rule's budget of work (a cron
occurrence costs a few steps of it)."""
_MICRO = timedelta(microseconds=1)


class ScheduleBackfill:
    """The schedules part's backfill (a base of :class:`~duetime.app.schedules.Schedules`)."""

    _context: AppContext
    _audit: Audit
    get: Callable[[str], Awaitable[Schedule]]
    """The schedule of a name, or NotFound naming it (the part's own)."""

    async def backfill(
        self,
        name: str,
        *,
        from_: str | datetime,
        to: str | datetime,
        dry_run: bool = False,
        yes: bool = False,
        actor: Actor | None = None,
    ) -> Backfill:
        """Make the occurrences schedule ``name`` had in ``[from_, to]`` (both included) as
        timers, keyed as the materialiser keys them; ``dry_run`` lists them (and which exist)
        without writing. Refused, naming the field: ``from`` after ``to``, ``to`` after now on the
        database's clock, more than 10,000 occurrences without ``yes`` (field ``yes``)."""
        context = self._context
        start, end = _range(from_, to)
        schedule = await self.get(check_schedule_name(name))
        now = await context.store.db_now() or context.clock.now()
        if end > now:
            raise InvalidInput(
                "to", f"is in the future ({end.isoformat()} > now, {now.isoformat()})"
            )
        most = MOST if yes else CONFIRM_ABOVE  # without yes, counting stops past the confirmation
        instants = list(islice(_occurrences(schedule, start, end), most + 1))
        if len(instants) > MOST:
            raise InvalidInput("to", f"the range holds more than {MOST:,} occurrences; narrow it")
        if len(instants) > CONFIRM_ABOVE and not yes:
            raise InvalidInput(
                "yes",
                f"the range holds over {CONFIRM_ABOVE:,} occurrences: confirm with --yes"
                " (yes=True), or narrow it (--dry-run lists them)",
            )
        keys = [occurrence_key(schedule.name, instant) for instant in instants]
        if dry_run:
            stored = await _stored_keys(context, keys)
            listed = tuple(
                BackfillOccurrence(at, key, key in stored)
                for at, key in zip(instants, keys, strict=True)
            )
            return Backfill(schedule.name, start, end, True, listed, 0, len(stored))
        writes = TimerWrites(context)
        made: set[str] = set()
        for first in range(0, len(instants), BATCH):
            timers = [
                _timer(context, schedule, at, key)
                for at, key in zip(
                    instants[first : first + BATCH], keys[first : first + BATCH], strict=True
                )
            ]
            results = await writes.put(timers, "keep", None)
            made.update(r.timer.key for r in results if r.action == "created")
        occurrences = tuple(
            BackfillOccurrence(at, key, key not in made)
            for at, key in zip(instants, keys, strict=True)
        )
        if made:
            target = {"schedule": schedule.name, "from": start.isoformat(), "to": end.isoformat()}
            await self._audit.record("schedule_backfill", dict(target), len(made), actor=actor)
        return Backfill(
            schedule.name, start, end, False, occurrences, len(made), len(keys) - len(made)
        )


def _range(from_: str | datetime, to: str | datetime) -> tuple[datetime, datetime]:
    start, end = parse_instant(from_, "from"), parse_instant(to, "to")
    if start is None:
        raise InvalidInput("from", "is required: the first instant of the range")
    if end is None:
        raise InvalidInput("to", "is required: the last instant of the range")
    if start > end:
        raise InvalidInput("from", f"is after to ({start.isoformat()} > {end.isoformat()})")
    return start, end


def _occurrences(schedule: Schedule, start: datetime, end: datetime) -> Iterator[datetime]:
    """The schedule's occurrences in ``[start, end]``, by the expansion the materialiser uses,
    within the schedule's own ``start_at`` / ``end_at``: a fresh expansion (and its work
    budget, as for any one expansion) every :data:`EXPANSION` occurrences, from the last."""
    rule = recurrence_of(schedule)
    after = start - _MICRO
    while True:
        found = 0
        for instant in occurrences_between(rule, after, end, anchor=schedule.anchor_at):
            yield instant
            after, found = instant, found + 1
            if found == EXPANSION:
                break
        else:
            return


def _timer(context: AppContext, schedule: Schedule, at: datetime, key: str) -> NewTimer:
    return NewTimer(
        namespace=context.namespace,
        key=key,
        type=schedule.type,
        payload=schedule.payload,
        due_at=at,
        max_attempts=schedule.max_attempts,
        subject=schedule.subject,
        producer=context.producer_id(),
        window=schedule.window,
        spread=None if schedule.window is None else "hash",
    )


async def _stored_keys(context: AppContext, keys: list[str]) -> set[str]:
    """Which of ``keys`` a timer holds now."""
    found: set[str] = set()
    for key in keys:
        if await context.store.get_timer(context.namespace, key) is not None:
            found.add(key)
    return found
