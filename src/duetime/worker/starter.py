"""Starting what the claims bring, as slots allow: the worker's starter.

A claimed row goes to the fan-out (an event several destinations want), into the pacing (a row
a rate granted, held until its instant: see :data:`~duetime.worker.flow.RATE_START_DELAY`),
straight to the executor (a free slot), or into the queue of rows waiting for a slot. The
starter's own task starts the queue, oldest claim first, whenever the slot account says a slot
may have come free (:attr:`Slots.freed`): no other part calls into it. A row that waited past
its lease is given back unstarted; the rows never started are given back at shutdown.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Iterator, Mapping
from datetime import datetime

from duetime.bus.routes import Fan
from duetime.dispatch import Dispatch, Target
from duetime.model import Claimed, Finish, HeldRow, Outcome
from duetime.worker import attempts
from duetime.worker.completer import Completer
from duetime.worker.executor import Executor
from duetime.worker.fanout import FanOuter
from duetime.worker.leases import Held
from duetime.worker.shared import Shared
from duetime.worker.slots import Ready, Slots

log = logging.getLogger("duetime.worker")


class Starter:
    """Routes claimed rows and starts them as :class:`Slots` allow, oldest claim first."""

    def __init__(
        self,
        shared: Shared,
        slots: Slots,
        dispatch: Dispatch,
        executor: Executor,
        fan_outer: FanOuter,
        completer: Completer,
    ) -> None:
        """Rows go forward to the ``executor`` or the ``fan_outer``; those that end without
        either (unreadable, given back) go straight to the ``completer``."""
        self.shared = shared
        self.clock = shared.clock
        self.dispatch = dispatch
        self._slots = slots
        self._executor = executor
        self._fan_outer = fan_outer
        self._completer = completer
        self._owner = shared.owner
        self._ready: deque[Ready] = deque()  # claimed beyond the free slots, not started
        self._queued = asyncio.Event()  # rows wait in _ready: the task watches for a slot
        # Rows a rate granted, waiting for their paced instant (RATE_START_DELAY) before they
        # wait for a slot: they take no slot and no room meanwhile (were they to, a worker could
        # start no more than its slots per RATE_START_DELAY); the rate bounds them, at most
        # its starts of RATE_START_DELAY plus its burst across every worker.
        self._pacing: dict[int, Ready] = {}
        self._task: asyncio.Task[None] | None = None
        self.started = 0
        """Attempts started so far (the producer measures its pace by them)."""

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> None:
        """Start the rows waiting for a slot whenever one may have come free, from now on."""
        self._task = asyncio.get_running_loop().create_task(self._run(), name="duetime-starter")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait([task])

    async def _run(self) -> None:
        """While rows wait for a slot, start them each time one may have come free (and sleep
        while none wait, so that a worker with free slots pays no step a finished attempt)."""
        freed, queued = self._slots.freed, self._queued
        while True:
            await queued.wait()
            await freed.wait()
            freed.clear()
            self.start_ready()
            if not self._ready:
                queued.clear()

    # -- what the worker asks ---------------------------------------------------------------
    @property
    def waiting(self) -> int:
        """Rows claimed and waiting for a slot."""
        return len(self._ready)

    def open_slots(self) -> int:
        """Free slots beyond the rows already waiting for one (negative: more rows wait)."""
        return self._slots.free() - len(self._ready)

    def held(self) -> Iterator[HeldRow]:
        """The rows claimed and not started yet, each with its claim's token."""
        for ready in (*self._ready, *self._pacing.values()):
            timer = ready.claimed.timer
            yield timer.id, timer.claim_token

    def release_waiting(self) -> None:
        """Give back the rows claimed but never started, as they were (shutdown)."""
        while self._ready:
            self._release(self._ready.popleft().claimed)
        paced = list(self._pacing.values())
        self._pacing.clear()
        for waiting in paced:
            self._release(waiting.claimed)

    # -- starting ---------------------------------------------------------------------------
    def take(
        self,
        claimed: list[Claimed],
        start_at: datetime | None,
        lease_until: datetime,
        paced: Mapping[int, datetime],
    ) -> None:
        """Start what a claim brought, as slots allow (the rest waits in order for a slot):
        held until ``start_at`` when claimed ahead, and a row a rate granted until its instant
        in ``paced``."""
        self._owner.check("Starter.take")
        loop = asyncio.get_running_loop()
        held = self.shared.leases.held(lease_until)
        route = self.dispatch.target
        fans: list[tuple[Claimed, Fan]] = []
        pacing: dict[datetime, list[Ready]] = {}  # rows a rate granted, by their instant
        free = self._slots.free() if not self._ready else 0  # slots; the waiting rows go first
        now = self.clock.now()
        now_starting: list[tuple[Claimed, Target, Held]] = []  # started together, in one task
        for item in claimed:
            if item.problem is not None:
                self._unreadable(item)
                continue
            start_at_row = start_at
            run_at = item.timer.run_at
            if run_at > now and (start_at is None or run_at > start_at):
                start_at_row = run_at  # claimed ahead of its own instant: held until then
            goes = route(item.timer)
            if type(goes) is Fan:
                fans.append((item, goes))
            elif paced and item.timer.id in paced:
                ready = Ready(item, goes, start_at_row, held)
                pacing.setdefault(paced[item.timer.id], []).append(ready)
            elif free > 0:
                free -= 1
                self.started += 1
                if start_at_row is None:
                    now_starting.append((item, goes, held))
                else:
                    self._executor.start(item, goes, start_at_row, loop, held)
            else:
                self._ready.append(Ready(item, goes, start_at_row, held))
                self._queued.set()
        self._executor.start_now(now_starting, loop)
        for at, readies in pacing.items():
            self._pace(readies, at, loop)
        self.start_ready()
        if fans:
            self._fan_outer.start(fans, loop)

    def _pace(self, readies: list[Ready], at: datetime, loop: asyncio.AbstractEventLoop) -> None:
        """Hold rows one grant of a rate gave until ``at`` (see :data:`RATE_START_DELAY`),
        then queue them for a slot like others (those not given back meanwhile, at shutdown)."""
        pacing = self._pacing
        for ready in readies:
            pacing[ready.claimed.timer.id] = ready

        def due() -> None:
            self._ready.extend(r for r in readies if pacing.pop(r.claimed.timer.id, None))
            self.start_ready()
            if self._ready:
                self._queued.set()

        loop.call_later(max(0.0, (at - self.clock.now()).total_seconds()), due)

    def start_ready(self) -> None:
        """Start timers waiting for a slot, oldest claim first, while slots are free."""
        ready = self._ready
        if not ready:
            return
        free = self._slots.free()
        if free <= 0:
            return
        self._owner.check("Starter.start_ready")
        loop = asyncio.get_running_loop()
        usable = self.shared.leases.usable
        now = self.clock.now()
        stale = 0
        now_starting: list[tuple[Claimed, Target, Held]] = []  # started together, in one task
        while ready and free > 0:
            item = ready.popleft()
            if not usable(item.held, now):
                stale += 1
                self._release(item.claimed)
                continue
            free -= 1
            self.started += 1
            if item.start_at is None:
                now_starting.append((item.claimed, item.target, item.held))
            else:
                self._executor.start(item.claimed, item.target, item.start_at, loop, item.held)
        self._executor.start_now(now_starting, loop)
        if stale:
            log.warning(
                "%d claimed timers waited past their lease (was this process paused?): given "
                "back unstarted, in case another node has taken them over",
                stale,
            )

    def _unreadable(self, claimed: Claimed) -> None:
        """A row the store could not read ends alone, dead with the reason."""
        problem = claimed.problem or "unknown"
        log.error(
            "timer id %d (key %s) cannot be read: %s",
            claimed.timer.id,
            claimed.timer.key,
            problem,
            extra=self.shared.about(claimed.timer, claimed.attempt),
        )
        finish = attempts.unreadable(claimed.timer.id, claimed.attempt, problem)
        self._completer.record(claimed.timer, finish)

    def _release(self, claimed: Claimed) -> None:
        """Give a row back as it was, unstarted (fenced: a no-op if it was taken over)."""
        timer = claimed.timer
        self._completer.record(timer, Finish(timer.id, claimed.attempt, Outcome.RELEASED))
