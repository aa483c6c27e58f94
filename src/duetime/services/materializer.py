"""The schedule materialiser: turns each schedule's next occurrence into an ordinary Timer.

Each schedule row stores its next occurrence (``next_at``). Whichever worker gets to a due row
creates that occurrence's timer (key ``schedule:<name>:<instant>``) and advances the row, in one
transaction: no occurrence is lost while workers are down, none fires twice with many workers.
It runs ``lookahead`` ahead of time, so the timer exists before it is due and fires on time.

Catch-up: occurrences less than the schedule's ``catch_up_grace`` late are simply
late and fire. When the oldest overdue occurrence is more than that late (everything was down),
the schedule's ``catch_up`` decides: ``latest`` fires the most recent overdue occurrence once,
``all`` every one (oldest first, ``per_schedule`` per batch), ``none`` none of them; then it
goes on with the next future occurrence.

Overlap (:mod:`duetime.timemath.recurrence.overlap`): a schedule whose ``overlap`` is not ``allow``
is materialised ahead too, with the state of its earlier occurrences read under the schedule row's
lock. An occurrence with nothing unfinished before it fires (at its instant, claimed ahead like any
timer: nothing finished comes back unfinished); one behind an unfinished occurrence waits, and the
end of that one decides (the stores' release trigger); one already due is decided at once: fired,
buffered or recorded as skipped. Nothing more is read for ``allow`` schedules."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from duetime.clock import Clock, unwatch, watch
from duetime.errors import RuleTooCostly
from duetime.model.schedules import DueSchedule, Occurrence, OccurrenceState
from duetime.schedules import Materialized, ScheduleAdvance
from duetime.services.base import Service
from duetime.services.held import release_held
from duetime.services.schedule_plans import LOOKAHEAD as LOOKAHEAD
from duetime.services.schedule_plans import NOTHING_UNFINISHED, Planned, due_by, shape_key, stopped
from duetime.services.schedule_plans import PER_SCHEDULE as PER_SCHEDULE
from duetime.services.schedule_plans import PlanCache as PlanCache
from duetime.services.schedule_plans import plan_advance as plan_advance
from duetime.services.tzdata import TzdataReport, reresolve_if_changed
from duetime.services.windows import Windows
from duetime.store.protocol import Store
from duetime.timemath.recurrence.overlap import gated

log = logging.getLogger("duetime.materializer")

RECHECK = timedelta(seconds=30)
BATCH_SIZE = 500
WINDOWS_FROM = 20
"""A backlog is walked in windows of ids only where the table holds at least this many
batches' worth of ids (smaller, earliest first costs as little)."""
MIN_PAUSE = 0.05
"""Seconds between two rounds at least, so a burst of wake-up hints costs a few queries."""


class Materializer(Service):
    """Materialises one namespace's due schedules: :meth:`tick` once, or :meth:`run` until
    stopped (sleeping until the next schedule is nearly due, woken early by the store's
    wake-up hints: a schedule added or changed anywhere)."""

    name = "materializer"

    def __init__(
        self,
        store: Store,
        clock: Clock,
        namespace: str,
        *,
        lookahead: timedelta = LOOKAHEAD,
        recheck: timedelta = RECHECK,
        batch_size: int = BATCH_SIZE,
        per_schedule: int = PER_SCHEDULE,
        check_tzdata: bool = True,
    ) -> None:
        if lookahead < timedelta(0) or recheck <= timedelta(0):
            raise ValueError("lookahead must not be negative, recheck positive")
        if batch_size < 1 or per_schedule < 1:
            raise ValueError("batch_size and per_schedule must be at least 1")
        self.store = store
        self.schedules = store.schedules
        self.clock = clock
        self.namespace = namespace
        self.lookahead = lookahead
        self.recheck = recheck
        self.batch_size = batch_size
        self.per_schedule = per_schedule
        self.check_tzdata = check_tzdata
        self.next_wake: datetime | None = None
        """When :meth:`run` plans its next round (None while it works): fold into a sleep."""
        self.created = 0
        self.tzdata: TzdataReport | None = None
        self._wake = asyncio.Event()

    def plan(
        self,
        due: Sequence[Planned],
        now: datetime,
        states: Mapping[int, OccurrenceState] | None = None,
        cache: PlanCache | None = None,
    ) -> list[ScheduleAdvance]:
        if cache is None:
            cache = PlanCache()
        else:
            cache.bound()
        states = {} if states is None else states
        advances = []
        for schedule in due:
            known = cache.costly.get(key := shape_key(schedule, now))
            if known is not None:
                advances.append(stopped(schedule, known))
                continue
            try:
                if gated(schedule.overlap):  # its plan depends on its occurrences' states
                    advance = plan_advance(
                        schedule,
                        now,
                        lookahead=self.lookahead,
                        per_schedule=self.per_schedule,
                        cache=cache,
                        state=states.get(schedule.id, NOTHING_UNFINISHED),
                    )
                else:
                    advance = self._planned_alike(schedule, now, cache)
            except RuleTooCostly as exc:
                cache.costly[key] = exc
                advance = stopped(schedule, exc)
            advances.append(advance)
        return advances

    def _planned_alike(self, schedule: Planned, now: datetime, cache: PlanCache) -> ScheduleAdvance:
        """plan_advance, once per round for schedules alike in rule and position (a million
        users' daily greeting: a few thousand distinct plans); each gets its own keys."""
        key = shape_key(schedule, now)
        shape = cache.shapes.get(key)
        if shape is None:
            advance = plan_advance(
                schedule, now, lookahead=self.lookahead, per_schedule=self.per_schedule, cache=cache
            )
            cache.shapes[key] = (
                tuple(due_at for _, due_at in advance.timers),
                advance.next_at,
                advance.after_at,
                advance.last_at,
            )
            return advance
        fire, next_at, after_at, last_at = shape
        timers = tuple(Occurrence(cache.key(schedule.name, instant), instant) for instant in fire)
        return ScheduleAdvance(schedule.id, schedule.version, next_at, after_at, last_at, timers)

    async def tick(self, now: datetime) -> int:
        """Materialise everything due by ``now + lookahead``; the number of timers created.
        First, local times stored from SQL get their instants (:mod:`.held`).

        One batch first; when it comes back full (a backlog: a day's million birthdays, or the
        schedules due while every worker was down), the rest in the store's
        ``materialize_lanes`` concurrent transactions, each taking its own due rows (the
        stores skip rows another transaction holds), so planning the next batch overlaps the
        database writing the last: in windows of ids first (the table's order, where the table
        is large enough), then earliest first until a batch comes back short."""
        await release_held(self.schedules, now)
        horizon = now + self.lookahead
        cache = PlanCache()
        created, backlog = await self._batches(now, horizon, cache, until_full=False)
        if backlog:
            ids = await self.schedules.schedule_ids()
            rows = self.batch_size * self.schedules.backlog_growth
            if ids is not None and len(ids) >= WINDOWS_FROM * rows:
                # In the table's order first (see duetime.services.windows), then earliest
                # first whatever is left: rows another worker held, a capped catch-up's next
                # occurrences, everything if the due rows were too thin for windows.
                windows = Windows(ids, rows)
                created += await self._lanes(lambda: self._windows(now, horizon, cache, windows))
            created += await self._lanes(lambda: self._until_short(now, horizon, cache))
        self.created += created
        return created

    async def _lanes(self, lane: Callable[[], Coroutine[Any, Any, int]]) -> int:
        """``lane`` in the store's ``materialize_lanes`` concurrent tasks: the timers created."""
        async with asyncio.TaskGroup() as group:
            tasks = [
                group.create_task(lane()) for _ in range(max(1, self.schedules.materialize_lanes))
            ]
        return sum(task.result() for task in tasks)

    async def _until_short(self, now: datetime, horizon: datetime, cache: PlanCache) -> int:
        created, _ = await self._batches(now, horizon, cache, until_full=True)
        return created

    async def _windows(
        self, now: datetime, horizon: datetime, cache: PlanCache, windows: Windows
    ) -> int:
        """One lane through a backlog, window by window: the timers created."""
        created = 0

        def plan(
            due: Sequence[DueSchedule], states: Mapping[int, OccurrenceState]
        ) -> list[ScheduleAdvance]:
            return self.plan(due, now, states, cache)

        while (window := windows.take()) is not None:
            result: Materialized = await self.schedules.materialize(
                self.namespace, horizon, len(window), plan, now, ids=window
            )
            windows.found(window, result.due)
            created += result.timers
        return created

    async def _batches(
        self, now: datetime, horizon: datetime, cache: PlanCache, *, until_full: bool
    ) -> tuple[int, bool]:
        """Batches in one lane: one (``until_full`` false), or until one comes back short.
        The timers created, and whether more is due (the last batch was full, or schedules
        have more occurrences to make: capped catch-up)."""
        created = 0
        still_due: list[int] = []

        def plan(
            due: Sequence[DueSchedule], states: Mapping[int, OccurrenceState]
        ) -> list[ScheduleAdvance]:
            advances = self.plan(due, now, states, cache)
            still_due[:] = [a.schedule_id for a in advances if due_by(a.next_at, horizon)]
            return advances

        limit = self.batch_size
        while True:
            result: Materialized = await self.schedules.materialize(
                self.namespace, horizon, limit, plan, now
            )
            created += result.timers
            more = result.advanced > 0 and (result.due >= limit or bool(still_due))
            if not (more and until_full):
                return created, more
            if result.due >= limit:  # a backlog: fewer, larger transactions while it lasts
                limit = min(2 * limit, self.schedules.backlog_growth * self.batch_size)

    async def prepare(self) -> None:
        """Once per process: re-resolve local times and schedules if the tz data changed."""
        if not self.check_tzdata or self.tzdata is not None:
            return
        try:
            self.tzdata = await reresolve_if_changed(
                self.schedules, self.clock.now(), timers=self.store
            )
        except Exception:
            log.exception("re-resolving for new tz data failed; will retry on next start")

    async def run_once(self) -> int:
        """:meth:`prepare`, then one :meth:`tick` now (``duetime tick``, serverless)."""
        await self.prepare()
        return await self.tick(self.clock.now())

    async def once(self) -> None:
        await self.run_once()

    async def run(self, stop_event: asyncio.Event) -> None:
        """Work until ``stop_event`` is set (after :meth:`prepare`).

        Wake-up hints are heard only while it runs: a materializer made for one ``run_once``
        (every ``tick``) must leave no listener behind on a clock or store that outlives it.
        """
        watch(self.clock, self._wake)
        self.store.add_wakeup_listener(self._on_wakeup)
        try:
            await self._work(stop_event)
        finally:
            unwatch(self.clock, self._wake)
            self.store.remove_wakeup_listener(self._on_wakeup)

    async def _work(self, stop_event: asyncio.Event) -> None:
        """Rounds: materialise, then read when the next schedule is due and sleep until then
        (at most ``recheck``). A round woken by neither a hint nor a due schedule (the safety
        re-check) reads first and materialises only if that read finds one due: an idle
        worker's re-check is then one read, not a materialising transaction and a read."""
        await self.prepare()
        work = True  # the first round materialises whatever the next schedule says
        while not stop_event.is_set():
            self._wake.clear()
            self.next_wake = None
            try:
                upcoming = None
                if not work:
                    await release_held(self.schedules, self.clock.now())  # a missed hint's
                    upcoming = await self.schedules.next_schedule_at(
                        self.namespace, self.lookahead / 2
                    )
                    work = upcoming is not None and upcoming <= self.clock.now()
                if work:
                    await self.tick(self.clock.now())
                    upcoming = await self.schedules.next_schedule_at(
                        self.namespace, self.lookahead / 2
                    )
            except Exception:
                log.exception("materialising schedules failed; retrying shortly")
                await self._sleep(stop_event, 1.0)
                work = True
                continue
            now = self.clock.now()
            wake_at = now + self.recheck
            if upcoming is not None:
                wake_at = min(wake_at, upcoming)
            self.next_wake = wake_at
            await self._sleep(stop_event, max((wake_at - now).total_seconds(), MIN_PAUSE))
            # A hint (a schedule added or changed, a test clock moved) or the next schedule's
            # instant: materialise at once; the re-check alone: read first.
            work = self._wake.is_set() or (upcoming is not None and upcoming <= self.clock.now())

    def _on_wakeup(self, earliest: datetime | None) -> None:
        planned = self.next_wake
        if earliest is None or planned is None or earliest - self.lookahead / 2 < planned:
            self._wake.set()

    async def _sleep(self, stop_event: asyncio.Event, seconds: float) -> None:
        """Until ``seconds`` pass, a wake-up hint arrives (after MIN_PAUSE) or we stop."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        stop = asyncio.ensure_future(stop_event.wait())
        try:
            await asyncio.wait([stop], timeout=min(MIN_PAUSE, seconds))
            remaining = deadline - loop.time()
            if stop.done() or remaining <= 0:
                return
            wake = asyncio.ensure_future(self._wake.wait())
            try:
                await asyncio.wait([stop, wake], timeout=remaining, return_when="FIRST_COMPLETED")
            finally:
                wake.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await wake
        finally:
            stop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await stop
