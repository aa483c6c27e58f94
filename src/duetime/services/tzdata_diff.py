"""What a tz data update would move, before it is installed: ``duetime tzdata diff``.

A country may abolish DST with weeks of notice; the next ``tzdata`` release then moves every
pending local-form timer and every schedule occurrence in that zone (duetime re-resolves them on
start, so "09:00 local" stays 09:00 local). An operator previews that here against a compiled
zoneinfo tree (a newer ``tzdata`` package's ``zoneinfo`` folder, or one built with ``zic``):
each timer and each of a schedule's next occurrences whose UTC instant differs under those
rules, with its key, zone, local time, and the instant now and then. An occurrence is paired
with the other rules' occurrence at the same local date and time, wherever that falls: one
moved earlier may come before the next instant of today's rules. Nothing is written.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from duetime.errors import InvalidInput, RuleTooCostly
from duetime.model import JSON, Schedule, Timer, iso
from duetime.schedules import occurrence_key, recurrence_of
from duetime.store.parts import ScheduleStore
from duetime.support.tzif import read_zone
from duetime.timemath.recurrence import Recurrence
from duetime.timemath.recurrence.budget import INSTANT_STEPS, MAX_STEPS, bounded
from duetime.timemath.recurrence.calendar import calendar_instants
from duetime.timemath.recurrence.cron import cron_instants
from duetime.timemath.recurrence.occurrences import budget_for
from duetime.timemath.tzmath import parse_disambiguation, stored_zone, to_local, to_utc

PAGE = 500
SLACK = timedelta(hours=3)
"""Wall time around the window also expanded: a time in a gap runs just after it (a gap of
more than 3 hours is skipped), and a repeated hour's first pass is counted before its second."""
EXPANDED = 100_000
"""Occurrences expanded a side at most (a secondly rule's day), so a preview is bounded; each
side's expansion is granted the steps that many instants take (see :func:`_walled`)."""
log = logging.getLogger("duetime.tzdata")
_TINY = timedelta(microseconds=1)


@dataclass(frozen=True, slots=True)
class ZoneMove:
    """One timer (or schedule occurrence) whose instant differs under the other rules.

    ``then_at`` is None when the other rules cannot place it: the zone is not in that tree, or
    the time falls in a new gap and the timer's disambiguation is ``reject``.
    """

    kind: str
    namespace: str
    key: str
    timezone: str
    local: datetime
    now_at: datetime
    then_at: datetime | None

    def to_dict(self) -> dict[str, JSON]:
        return {
            "kind": self.kind,
            "namespace": self.namespace,
            "key": self.key,
            "timezone": self.timezone,
            "local": self.local.isoformat(),
            "now_at": iso(self.now_at),
            "then_at": iso(self.then_at) if self.then_at is not None else None,
        }


class ZoneTree:
    """Zones read from a compiled zoneinfo tree, by name (None: not in the tree; a file there
    that is not a whole TZif file is an :class:`InvalidInput` naming it)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise InvalidInput("zoneinfo", f"{str(root)!r} is not a directory")

    @functools.lru_cache(maxsize=1024)  # noqa: B019 - one tree per command, a few hundred zones
    def zone(self, name: str) -> ZoneInfo | None:
        stored_zone(name)  # a name duetime accepted: no path tricks reach the file system
        path = self.root.joinpath(*name.split("/"))
        if not path.is_file():
            return None
        return read_zone(path, name)  # a damaged file: an error naming it, never a hang


async def tzdata_diff(
    store: ScheduleStore, zoneinfo: str | Path, now: datetime, count: int = 5
) -> list[ZoneMove]:
    """Every pending local-form timer, and each schedule's next ``count`` occurrences, that
    the rules in ``zoneinfo`` would move; timers first (by id), then schedules (by id)."""
    tree = ZoneTree(zoneinfo)
    moves: list[ZoneMove] = []
    after_id = 0
    while timers := await store.pending_local_timers(after_id, PAGE):
        after_id = timers[-1].id
        moves += [move for timer in timers if (move := _timer_move(timer, tree)) is not None]
    after_id = 0
    while schedules := await store.schedules_after(after_id, PAGE):
        after_id = schedules[-1].id
        # Expanding a page of rules is CPU work: off the event loop, each rule within budget.
        moves += await asyncio.to_thread(_page_moves, schedules, tree, now, count)
    return moves


def _page_moves(
    schedules: list[Schedule], tree: ZoneTree, now: datetime, count: int
) -> list[ZoneMove]:
    moves: list[ZoneMove] = []
    for schedule in schedules:
        if not schedule.active or schedule.next_at is None:
            continue
        try:
            moves.extend(_schedule_moves(schedule, tree, now, count))
        except RuleTooCostly as exc:  # one costly rule does not hide the others' moves
            log.warning("tzdata diff skips schedule %r: %s", schedule.name, exc.message)
    return moves


def _timer_move(timer: Timer, tree: ZoneTree) -> ZoneMove | None:
    if timer.local is None or timer.timezone is None:
        return None
    zone = tree.zone(timer.timezone)
    then: datetime | None = None
    if zone is not None:
        try:
            then = to_utc(timer.local, zone, parse_disambiguation(timer.disambiguation))
        except InvalidInput:
            then = None
    if then == timer.due_at:
        return None
    return ZoneMove(
        "timer", timer.namespace, timer.key, timer.timezone, timer.local, timer.due_at, then
    )


def _schedule_moves(
    schedule: Schedule, tree: ZoneTree, now: datetime, count: int
) -> list[ZoneMove]:
    rule = recurrence_of(schedule)
    if rule.every is not None:
        return []  # real elapsed time: no zone
    after = max(now, schedule.next_at - _TINY) if schedule.next_at else now
    window = _instants(rule, rule.zone, after, count)
    if not window:
        return []
    zone = tree.zone(schedule.timezone)
    paired: dict[datetime, datetime] = {}
    if zone is not None:
        # An occurrence the other rules move earlier lies before `after` under them: both
        # sides are expanded from where the window's first wall time falls under either rules
        # to its last one, SLACK around, then paired by wall time.
        first, last = to_local(window[0], rule.zone), to_local(window[-1], rule.zone)
        start = min(after, _earliest(first, rule.zone, after), _earliest(first, zone, after))
        start, stop = start - SLACK, last + SLACK
        paired = pair_by_local(
            _walled(rule, rule.zone, start, stop), _walled(rule, zone, start, stop)
        )
    moves = []
    for instant in window:
        then = paired.get(instant)
        if then != instant:
            moves.append(
                ZoneMove(
                    "schedule",
                    schedule.namespace,
                    occurrence_key(schedule.name, instant),
                    schedule.timezone,
                    to_local(instant, rule.zone),
                    instant,
                    then,
                )
            )
    return moves


def pair_by_local(
    current: list[tuple[datetime, datetime]], other: list[tuple[datetime, datetime]]
) -> dict[datetime, datetime]:
    """Each ``current`` instant's counterpart in ``other`` (both ``(wall time, instant)``, in
    order): the occurrence at the same wall time (the n-th of a repeated hour with the n-th);
    what is left, in order within each local date (a time in a new gap run just after it).
    An occurrence with no counterpart (skipped in a new gap) is not in the result."""
    mine, theirs = _numbered(current), _numbered(other)
    paired = {instant: theirs[key] for key, instant in mine.items() if key in theirs}
    left: dict[date, list[datetime]] = defaultdict(list)
    for key, instant in theirs.items():
        if key not in mine:
            left[key[0].date()].append(instant)
    unpaired: dict[date, list[datetime]] = defaultdict(list)
    for key, instant in mine.items():
        if key not in theirs:
            unpaired[key[0].date()].append(instant)
    for day, instants in unpaired.items():
        paired.update(zip(instants, left.get(day, ()), strict=False))
    return paired


def _numbered(items: list[tuple[datetime, datetime]]) -> dict[tuple[datetime, int], datetime]:
    """``(wall time, how many times it came before)`` -> instant, in order."""
    seen: Counter[datetime] = Counter()
    numbered = {}
    for wall, instant in items:
        numbered[wall, seen[wall]] = instant
        seen[wall] += 1
    return numbered


def _walled(
    rule: Recurrence, zone: ZoneInfo, after: datetime, stop: datetime
) -> list[tuple[datetime, datetime]]:
    """The rule's instants under ``zone`` after ``after`` with their wall times, up to the
    first one whose wall time is past ``stop`` (at most :data:`EXPANDED`)."""
    found: list[tuple[datetime, datetime]] = []
    # A dense rule reaches EXPANDED long before an ordinary budget's end: the budget grants
    # what that many instants take besides, so the cap bounds a dense rule and the steps a
    # sparse, costly one.
    for instant in _source(rule, zone, after, MAX_STEPS + EXPANDED * INSTANT_STEPS):
        wall = to_local(instant, zone)
        if len(found) == EXPANDED or wall > stop:
            break
        if rule.end_at is not None and instant > rule.end_at:
            break
        found.append((wall, instant))
    return found


def _earliest(wall: datetime, zone: ZoneInfo, otherwise: datetime) -> datetime:
    """The earliest instant ``zone`` could show ``wall`` at (``otherwise`` out of range)."""
    try:
        return to_utc(wall, zone, "earlier")
    except InvalidInput:
        return otherwise


def _source(
    rule: Recurrence, zone: ZoneInfo, after: datetime, steps: int = MAX_STEPS
) -> Iterator[datetime]:
    """The rule's instants after ``after``, within an expansion budget of ``steps``."""
    if rule.calendar is not None:
        found = calendar_instants(rule.calendar, zone, after, rule.on_gap, rule.on_overlap)
    else:
        found = cron_instants(rule.expression, zone, after, rule.on_gap, rule.on_overlap)
    return bounded(found, budget_for(rule, steps=steps))


def _instants(rule: Recurrence, zone: ZoneInfo, after: datetime, count: int) -> list[datetime]:
    found: list[datetime] = []
    for instant in _source(rule, zone, after):
        if len(found) == count or (rule.end_at is not None and instant > rule.end_at):
            break
        found.append(instant)
    return found
