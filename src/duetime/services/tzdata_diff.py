"""What a tz data update would move, before it is installed: ``duetime tzdata diff``.

A country may abolish DST with weeks of notice; the next ``tzdata`` release then moves every
pending local-form timer and every schedule occurrence in that zone (duetime re-resolves them on
start, so "09:00 local" stays 09:00 local). An operator previews that here against a compiled
zoneinfo tree (a newer ``tzdata`` package's ``zoneinfo`` folder, or one built with ``zic``):
each timer and each of a schedule's next occurrences whose UTC instant differs under those
rules, with its key, zone, local time, and the instant now and then. Nothing is written.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from duetime.errors import InvalidInput, RuleTooCostly
from duetime.model import JSON, Schedule, Timer, iso
from duetime.schedules import occurrence_key, recurrence_of
from duetime.store.parts import ScheduleStore
from duetime.timemath.recurrence import Recurrence
from duetime.timemath.recurrence.budget import bounded
from duetime.timemath.recurrence.calendar import calendar_instants
from duetime.timemath.recurrence.cron import cron_instants
from duetime.timemath.recurrence.occurrences import budget_for
from duetime.timemath.tzmath import parse_disambiguation, stored_zone, to_local, to_utc

PAGE = 500
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
    """Zones read from a compiled zoneinfo tree, by name (None: not in the tree)."""

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
        with path.open("rb") as source:
            try:
                return ZoneInfo.from_file(source, key=name)
            except ValueError:
                return None


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
    current = _instants(rule, rule.zone, after, count)
    zone = tree.zone(schedule.timezone)
    other = _instants(rule, zone, after, count) if zone is not None else []
    moves = []
    for index, instant in enumerate(current):
        then = other[index] if index < len(other) else None
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


def _instants(rule: Recurrence, zone: ZoneInfo, after: datetime, count: int) -> list[datetime]:
    if rule.calendar is not None:
        source = calendar_instants(rule.calendar, zone, after, rule.on_gap, rule.on_overlap)
    else:
        source = cron_instants(rule.expression, zone, after, rule.on_gap, rule.on_overlap)
    found: list[datetime] = []
    for instant in bounded(source, budget_for(rule)):
        if len(found) == count or (rule.end_at is not None and instant > rule.end_at):
            break
        found.append(instant)
    return found
