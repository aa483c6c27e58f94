"""Claiming due timers: the worker's producer.

It never polls on a fixed interval: it sleeps until the next due instant and is woken early
when a timer due sooner is stored (by this process or another). A bounded safety re-check runs
anyway, so a lost wake-up costs latency, never a timer. With a backlog it keeps
:data:`CLAIMS_IN_FLIGHT` claims under way and a little more work in hand than its free slots
(:data:`PREFETCH_HORIZON`); before a planned instant it claims ahead
(:mod:`~duetime.worker.claim_timing`) and holds the rows until then.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import cast

from duetime.config import Settings
from duetime.dispatch import Dispatch
from duetime.model import Claimed
from duetime.support.eventloop import on_loop
from duetime.worker import flow
from duetime.worker.claim_timing import ClaimTiming
from duetime.worker.flow import FlowGate
from duetime.worker.shared import Shared
from duetime.worker.slots import Slots
from duetime.worker.starter import Starter

log = logging.getLogger("duetime.worker")

PREFETCH_HORIZON = 0.05
"""Seconds of work, at the worker's recent pace, it may claim beyond its free slots.

The extra rows wait in memory (under this node's lease, shown ``running``) for a slot, so with
quick handlers the next ones are at hand the moment a slot frees, not a claim's round trip
later, and each claim carries more rows. With slow handlers the pace is low and so is the extra
(1 s handlers, concurrency 100: 5 rows): a worker never holds back more work than it starts
within this horizon while other workers idle. Rows never started are given back at shutdown."""
CLAIMS_IN_FLIGHT = 2
"""Claims a worker with a backlog keeps under way at once.

With one, the server sits idle while the worker reads and starts a claim's rows, and the worker
waits while the server looks for the next ones (on a 2-core machine, a quarter of the CPU was
idle during a drain). A second claim overlaps the two. Their rows start in the order the
claims were sent, whichever answer comes back first, so handlers start oldest first as long as
the server runs the claims in that order (it may not when one connection lags: then two
batches of overdue rows start out of order). Only a worker whose last claim came back full
pipelines: the first claim after a sleep, or one held for a planned instant, is made alone."""
FAILURE_PAUSE = 1.0
"""Seconds before claiming again after a claim or a next-due read failed."""


class Producer:
    """Claims due rows for one namespace when it is time to, and as much as slots allow."""

    def __init__(
        self,
        shared: Shared,
        slots: Slots,
        starter: Starter,
        gate: FlowGate,
        settings: Settings,
        namespace: str,
        dispatch: Dispatch,
        claim_ahead: timedelta,
        wake: asyncio.Event,
        stopping: asyncio.Event,
    ) -> None:
        """``wake`` is set by a wake-up hint or stop; ``gate`` takes the claims while flow
        control rules are in force; what a claim brings goes forward to the ``starter``, which
        starts it in the ``slots`` free."""
        self.shared = shared
        self.store = shared.store
        self.clock = shared.clock
        self.settings = settings
        self.namespace = namespace
        self.dispatch = dispatch
        self.timing = ClaimTiming(claim_ahead, shared.clock)
        """How far ahead of an instant to claim, and the clock reading for it."""
        self._capacity = slots.capacity
        self._wake = wake
        self._stopping = stopping
        self._slots = slots
        self._starter = starter
        self._gate = gate
        self._pace_mark = (0, 0.0)  # (attempts started, loop time) when the pace was measured
        self._pace = 0.0  # attempts started per second, lately
        self._prefetch = 0  # rows a claim may take beyond the free slots (see room)
        self._planned_wake: datetime | None = None
        self._target: datetime | None = None
        self._backlog = False  # the last claim came back full: more may be due right now
        # Pipelined claims under way, oldest first, each with the rows it may bring (counted
        # against the room for more).
        self._claims: dict[asyncio.Task[None], int] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self.claimed = 0
        """Rows claimed so far (this part's own count)."""
        self._rechecking = False  # woken by the safety re-check alone: read before claiming

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()

    # -- what the worker asks ---------------------------------------------------------------
    def room(self) -> int:
        """Rows the next claim may take: the free slots, plus the prefetch allowance, less the
        rows already waiting for a slot and those the claims under way may bring."""
        claiming = sum(self._claims.values())
        return self._starter.open_slots() + self._prefetch - claiming

    async def settle(self) -> None:
        """Wait for the claims under way (their rows are started or given back like others)."""
        if self._claims:
            await asyncio.wait(list(self._claims))
        await self.timing.settle()

    # -- the main cycle ---------------------------------------------------------------------
    async def cycle(self) -> None:
        """One step: claim what is due (or pipeline a claim), or sleep until something is."""
        target, self._target = self._target, None
        self._prefetch = 0 if target is not None else self._prefetch_allowance()
        room = self.room()
        # With a backlog, wait for a useful number of free slots rather than claiming (one
        # transaction each) every time a single handler returns; with rows waiting for a
        # slot, until half the prefetch allowance is free, so each claim takes many.
        need = min(
            self.settings.batch_size, max(1, self.settings.concurrency // 10, self._prefetch // 2)
        )
        if self._claims and (not self._backlog or len(self._claims) >= CLAIMS_IN_FLIGHT):
            self._target = target  # a claim under way says what comes next: wait for it
            await asyncio.wait(list(self._claims), return_when=asyncio.FIRST_COMPLETED)
            return
        if room <= 0 or (self._backlog and room < need):
            self._target = target
            await self.wait_for_capacity(1 if room <= 0 else need)
            return
        if self._rechecking and not self._wake.is_set():
            # The safety re-check found the worker asleep with nothing due that it knew of:
            # one read of the next due time says whether a claim is worth a transaction.
            self._rechecking = False
            await self._sleep_until_due()
            return
        self._rechecking = False
        self._wake.clear()
        want = min(self.settings.batch_size, room)
        if self._backlog and target is None:
            self._claim_in_pipeline(want)
            return
        try:
            claimed = await self.claim(want, target)
        except Exception:
            log.exception("claiming due timers failed; retrying shortly")
            self._backlog = False
            await self._sleep(FAILURE_PAUSE)
            return
        self._backlog = len(claimed) == want
        if self._backlog:
            return  # there may be more due right now
        await self._sleep_until_due()

    async def _sleep_until_due(self) -> None:
        """Sleep until the next due row (claimed a little ahead), a hint, or the re-check."""
        plan = self._gate.plan
        try:
            if plan.empty:
                next_run = await self.store.next_run_at(self.namespace, self.dispatch.claim_filter)
            else:
                next_run = await self._gate.next_run_at()
        except Exception:
            log.exception("reading the next due time failed; retrying shortly")
            await self._sleep(FAILURE_PAUSE)
            return
        now = self.clock.now()
        deadline = now + self.settings.recheck
        if not plan.empty:
            deadline = min(deadline, now + timedelta(seconds=flow.RULES_REFRESH))
        wake_at = deadline
        if next_run is not None and next_run < deadline:
            deadline = next_run
            wake_at = next_run - self.timing.ahead(plan.rated)
        retry_at = self._gate.retry_at
        if retry_at is not None and retry_at < wake_at:
            deadline = wake_at = retry_at  # a limit allows more then: claim then, not ahead
        self._planned_wake = deadline
        if wake_at > now and not self._wake.is_set():
            self._report_idle(next_run)
        woken = await self._sleep((wake_at - now).total_seconds())
        self._planned_wake = None
        if not woken and deadline == next_run and self.timing.claim_ahead:
            self._target = deadline  # claim what is due then, now, and hold it until then
        elif not woken and deadline != next_run and plan.empty and retry_at is None:
            self._rechecking = True  # nothing was due by the deadline: see cycle

    def _report_idle(self, next_due: datetime | None) -> None:
        for observer in self.shared.observers:
            try:
                observer.idle(self.namespace, next_due)
            except Exception:  # a metrics hook must not stop the claims
                log.exception("a worker observer failed on going idle")

    async def _sleep(self, seconds: float) -> bool:
        """Sleep until woken or ``seconds`` have passed; True when woken (by a hint or stop)."""
        if self._wake.is_set():
            return True
        if seconds <= 0:
            return False
        try:
            await asyncio.wait_for(self._wake.wait(), timeout=seconds)
        except TimeoutError:
            return False
        return True

    def _prefetch_allowance(self) -> int:
        """See :data:`PREFETCH_HORIZON`: the rows started lately per second, times it."""
        loop = self._loop
        if loop is None:
            return 0
        now = loop.time()
        count, since = self._pace_mark
        if now - since >= 0.01:  # shorter spans say little
            started = self._starter.started
            pace = (started - count) / (now - since)
            self._pace = pace if now - since > 1.0 else (self._pace + pace) / 2
            self._pace_mark = (started, now)
        return min(self.settings.batch_size, int(self._pace * PREFETCH_HORIZON))

    async def wait_for_capacity(self, need: int = 1) -> None:
        """Until the next claim may take ``need`` rows (or nothing is running to free any)."""
        while True:
            if self.room() >= need:
                return
            busy = self._slots.busy or self._claims or self._starter.waiting
            if self._stopping.is_set() or not busy:
                return
            self._capacity.clear()
            await self._capacity.wait()

    def on_wakeup(self, earliest: datetime | None) -> None:
        """A store heard of new work; called on any thread (e.g. a sync App's own loop): what
        it changes is changed on this worker's loop."""
        loop = self._loop
        if loop is None or on_loop(loop):
            self._hinted(earliest)
        elif not loop.is_closed():
            loop.call_soon_threadsafe(self._hinted, earliest)

    def _hinted(self, earliest: datetime | None) -> None:
        self._gate.hinted()
        planned = self._planned_wake
        if earliest is None or planned is None or earliest < planned:
            self._wake.set()

    # -- claiming ---------------------------------------------------------------------------
    def _claim_in_pipeline(self, want: int) -> None:
        """Claim ``want`` rows due now without waiting for the answer (see
        :data:`CLAIMS_IN_FLIGHT`); the rows are taken after those of earlier claims."""
        previous = next(reversed(self._claims), None)
        task = asyncio.get_running_loop().create_task(self._pipelined_claim(want, previous))
        self._claims[task] = want

    async def _pipelined_claim(self, want: int, previous: asyncio.Task[None] | None) -> None:
        try:
            fetched = await self._fetch_claim(want, None)
            if previous is not None and not previous.done():
                await asyncio.wait([previous])  # its rows are older: they start first
            claimed = self._take_claimed(*fetched)
            if len(claimed) < want:
                self._backlog = False  # nothing more due now: the cycle may go to sleep
        except Exception:  # as in cycle: rows not started run out their lease, then retry
            log.exception("claiming due timers failed; retrying shortly")
            self._backlog = False  # the next claim is made alone (and waits if it fails)
        finally:
            self._claims.pop(cast(asyncio.Task[None], asyncio.current_task()), None)
            self._capacity.set()

    async def claim(self, limit: int, target: datetime | None) -> list[Claimed]:
        """Claim what is due now, or if ``target`` is ahead, due by then (held until then)."""
        return self._take_claimed(*await self._fetch_claim(limit, target))

    async def _fetch_claim(
        self, limit: int, target: datetime | None
    ) -> tuple[list[Claimed], float, datetime | None, datetime, Mapping[int, datetime]]:
        """The store's claim: (rows, seconds it took, the instant to hold them until, their
        lease, and when a rate granted rows: the instant each may start, see
        :data:`~duetime.worker.flow.RATE_START_DELAY`)."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        # The rules first: read through the store's shared connections, they may wait behind
        # busy handlers, and a lease taken before that wait would be spent by the claim.
        plan = await self._gate.rules(loop)
        now = self.clock.now()
        hold = target is not None and target > now
        if hold:
            self.timing.freshen_clock(loop)
        cutoff = target if hold and target is not None else now
        lease_until = now + self.settings.lease
        paced: Mapping[int, datetime] = {}
        # The rows due within the claim-ahead after the cutoff come too, each held until its
        # own instant (see Starter.take): timers due a millisecond apart (a stream of requests,
        # each due soon) then cost a claim a window, not a claim each. Under rules too: one
        # claim an instant (a limit's transaction, then a read of the next due) falls behind
        # once the two take longer than the gap between instants, and never claims ahead again.
        reach = cutoff + self.timing.ahead(plan.rated)
        if plan.rated:
            # A rate's bound holds for starts no later than the pacing after their grant
            # (flow.RATE_START_DELAY): no row is claimed, nor held, past it. The grant, on the
            # database's clock, comes after this instant.
            horizon = now + flow.RATE_START_DELAY
            reach, cutoff = min(reach, horizon), min(cutoff, horizon)
        if plan.empty:
            # Recorded as the attempts' claimed_at: ``now``, the claim's own instant, never the
            # horizon ahead of it (an attempt is claimed before it starts).
            claimed = await self.store.claim_due(
                self.namespace,
                self.dispatch.claim_filter,
                now,
                limit,
                self.shared.node_id,
                lease_until,
                due_by=reach,
            )
        else:
            claimed, paced = await self._gate.claim(plan, now, reach, limit, lease_until)
        return claimed, loop.time() - started, cutoff if hold else None, lease_until, paced

    def _take_claimed(
        self,
        claimed: list[Claimed],
        elapsed: float,
        start_at: datetime | None,
        lease_until: datetime,
        paced: Mapping[int, datetime],
    ) -> list[Claimed]:
        """Hand what a claim brought forward to the :class:`Starter`, once its timing is
        noted."""
        self.timing.took(asyncio.get_running_loop().time(), elapsed)
        self.claimed += len(claimed)
        if claimed:
            for observer in self.shared.observers:
                observer.claimed(self.namespace, len(claimed), elapsed)
        self._starter.take(claimed, start_at, lease_until, paced)
        return claimed
