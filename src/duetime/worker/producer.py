"""Claiming due timers: the worker's producer.

It never polls on a fixed interval: it sleeps until the next due instant and is woken early
when a timer due sooner is stored (by this process or another). A bounded safety re-check runs
anyway, so a lost wake-up costs latency, never a timer. With a backlog it keeps
:data:`CLAIMS_IN_FLIGHT` claims under way and a little more work in hand than its free slots
(:data:`PREFETCH_HORIZON`); before a planned instant it claims ahead (:data:`CLAIM_AHEAD`) and
holds the rows until then.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import cast

from duetime.bus.routes import Fan
from duetime.config import Settings
from duetime.dispatch import Dispatch, Target
from duetime.model import Claimed, Finish, HeldRow, Outcome
from duetime.model.limits import FlowPlan, plan_of
from duetime.worker import attempts
from duetime.worker.completer import Completer
from duetime.worker.executor import Executor
from duetime.worker.fanout import FanOuter
from duetime.worker.leases import Held
from duetime.worker.shared import Shared

log = logging.getLogger("duetime.worker")

CLAIM_AHEAD = timedelta(milliseconds=25)
"""How long before a planned due instant the worker claims it, at least (real clocks only).

The claim is a durable (fsynced) write; made ahead, its latency — a fraction of a millisecond
on an idle SSD, tens on a busy disk — is not added to the timer's lateness: the claimed timers
are held in memory and their handlers start at the due instant, never before it. When recent
claims took longer, the worker claims twice their worst time ahead, up to
:data:`MAX_CLAIM_AHEAD`. (Meanwhile the timer shows as ``running``: cancelling it that close to
its due instant is a conflict, as it would be a moment later.) The claim made ahead of an
instant also takes the rows due within this long after it, each held until its own instant:
timers due a millisecond apart cost a claim a window, not a claim each."""
MAX_CLAIM_AHEAD = timedelta(milliseconds=250)
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
RATE_START_DELAY = timedelta(milliseconds=100)
"""A row a rate limit granted starts this long after the grant (on the database's clock), not
as soon as its claim is back: the lag from grant to start differs between workers and claims
(a commit, a busy event loop), and starts taken at once would bunch the grants of one window
into a shorter one. Held to the grant's instant, the starts keep the rate's spacing unless a
worker lags by more than this."""
RULES_REFRESH = 1.0
"""Seconds a worker uses its namespace's flow control rules (:mod:`duetime.model.limits`) before
reading them again: a limit, pause or resume set anywhere reaches every worker within this.
While any rule is in force a worker sleeps at most this long, so it sees a resume in time."""


@dataclass(frozen=True, slots=True)
class _Ready:
    """A claimed timer waiting for a free slot: where it goes, the instant it was claimed ahead
    of (None: start it at once), and its lease."""

    claimed: Claimed
    target: Target
    start_at: datetime | None
    held: Held


class Producer:
    """Claims due rows for one namespace and starts them as slots allow."""

    def __init__(
        self,
        shared: Shared,
        settings: Settings,
        namespace: str,
        dispatch: Dispatch,
        claim_ahead: timedelta,
        wake: asyncio.Event,
        stopping: asyncio.Event,
    ) -> None:
        """``wake`` is set by a wake-up hint or stop; the executor, completer and fan-out are
        attached with :meth:`attach`."""
        self.shared = shared
        self.store = shared.store
        self.clock = shared.clock
        self.settings = settings
        self.namespace = namespace
        self.dispatch = dispatch
        self.claim_ahead = claim_ahead
        self._capacity = shared.capacity
        self._wake = wake
        self._stopping = stopping
        self._ready: deque[_Ready] = deque()  # claimed beyond the free slots, not started
        # Rows a rate granted, waiting for their paced instant (RATE_START_DELAY) before they
        # join _ready: they take no slot and no room meanwhile (were they to, a worker could
        # start no more than its slots per RATE_START_DELAY); the rate bounds them, at most
        # its starts of RATE_START_DELAY plus its burst across every worker.
        self._pacing: dict[int, _Ready] = {}
        self._started_count = 0  # attempts started (the pace of PREFETCH_HORIZON) …
        self._pace_mark = (0, 0.0)  # … and (count, loop time) when the pace was last measured
        self._pace = 0.0  # attempts started per second, lately
        self._prefetch = 0  # rows a claim may take beyond the free slots (see room)
        self._planned_wake: datetime | None = None
        self._target: datetime | None = None
        self._backlog = False  # the last claim came back full: more may be due right now
        # Pipelined claims under way, oldest first, each with the rows it may bring (counted
        # against the room for more).
        self._claims: dict[asyncio.Task[None], int] = {}
        self._claim_seconds: deque[float] = deque(maxlen=32)  # how long recent claims took
        self._loop: asyncio.AbstractEventLoop | None = None
        self._plan = FlowPlan()  # the namespace's flow control rules, as last read …
        self._plan_read = -RULES_REFRESH  # … at this loop time
        self._held: tuple[str, ...] = ()  # limits that held rows back at the last claim …
        self._retry_at: datetime | None = None  # … and when the first of them may allow more
        # No type free of rules is due before this instant (None: not known). Set when their
        # claim comes back short, so claims under rules stop stepping over held-back rows to
        # look for them; forgotten at a wake-up hint (_hints counts them) and at each re-read
        # of the rules.
        self._clear_until: datetime | None = None
        self._hints = 0
        self._rechecking = False  # woken by the safety re-check alone: read before claiming
        self._executor: Executor
        self._completer: Completer
        self._fan_outer: FanOuter

    def attach(self, executor: Executor, completer: Completer, fan_outer: FanOuter) -> None:
        self._executor, self._completer, self._fan_outer = executor, completer, fan_outer

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()

    # -- what the worker asks ---------------------------------------------------------------
    @property
    def waiting(self) -> int:
        """Rows claimed and waiting for a slot."""
        return len(self._ready)

    def held(self) -> Iterator[HeldRow]:
        """The rows claimed and not started yet, each with its claim's token."""
        for ready in (*self._ready, *self._pacing.values()):
            timer = ready.claimed.timer
            yield timer.id, timer.claim_token

    def free(self) -> int:
        """Slots for handlers to start in.

        ``concurrency`` bounds the handlers running at once. Their outcomes are written in
        batches while more handlers run; once ``batch_size`` outcomes wait for their write, every
        further one takes a slot until it is written. So a worker has at most ``concurrency +
        batch_size`` timers started and not recorded — the most that run again if it dies — and
        a slow store slows the handlers down instead of piling outcomes up in memory.
        """
        unwritten = self._completer.unwritten() - self.settings.batch_size
        return self.settings.concurrency - len(self._executor.in_flight) - max(0, unwritten)

    def room(self) -> int:
        """Rows the next claim may take: the free slots, plus the prefetch allowance, less the
        rows already waiting for a slot and those the claims under way may bring."""
        claiming = sum(self._claims.values())
        return self.free() + self._prefetch - len(self._ready) - claiming

    async def settle(self) -> None:
        """Wait for the claims under way (their rows are started or given back like others)."""
        if self._claims:
            await asyncio.wait(list(self._claims))

    def release_waiting(self) -> None:
        """Give back the rows claimed but never started, as they were (shutdown)."""
        while self._ready:
            self._release(self._ready.popleft().claimed)
        for waiting in list(self._pacing.values()):
            self._release(waiting.claimed)
        self._pacing.clear()

    # -- the main cycle ---------------------------------------------------------------------
    async def cycle(self) -> None:
        """One step: claim what is due (or pipeline a claim), or sleep until something is."""
        self.start_ready()
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
        plan = self._plan
        try:
            if plan.empty:
                next_run = await self.store.next_run_at(self.namespace, self.dispatch.claim_filter)
            else:
                clear = self._clear_until
                next_run = await self.store.limits.next_run_at(
                    self.namespace,
                    self.dispatch.claim_filter,
                    plan,
                    self._held,
                    ungoverned=clear is None,
                )
                if clear is not None and clear != _NEVER:
                    next_run = clear if next_run is None else min(next_run, clear)
        except Exception:
            log.exception("reading the next due time failed; retrying shortly")
            await self._sleep(FAILURE_PAUSE)
            return
        now = self.clock.now()
        deadline = now + self.settings.recheck
        if not plan.empty:
            deadline = min(deadline, now + timedelta(seconds=RULES_REFRESH))
        wake_at = deadline
        if next_run is not None and next_run < deadline:
            deadline = next_run
            wake_at = next_run - self._ahead()
        retry_at = self._retry_at
        if retry_at is not None and retry_at < wake_at:
            deadline = wake_at = retry_at  # a limit allows more then: claim then, not ahead
        self._planned_wake = deadline
        woken = await self._sleep((wake_at - now).total_seconds())
        self._planned_wake = None
        if not woken and deadline == next_run and self.claim_ahead:
            self._target = deadline  # claim what is due then, now, and hold it until then
        elif not woken and deadline != next_run and plan.empty and retry_at is None:
            self._rechecking = True  # nothing was due by the deadline: see cycle

    def _ahead(self) -> timedelta:
        """How long before a due instant to claim it: see :data:`CLAIM_AHEAD`."""
        if not self.claim_ahead:
            return self.claim_ahead
        slowest = timedelta(seconds=2 * max(self._claim_seconds, default=0.0))
        return min(max(self.claim_ahead, slowest), max(self.claim_ahead, MAX_CLAIM_AHEAD))

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
            pace = (self._started_count - count) / (now - since)
            self._pace = pace if now - since > 1.0 else (self._pace + pace) / 2
            self._pace_mark = (self._started_count, now)
        return min(self.settings.batch_size, int(self._pace * PREFETCH_HORIZON))

    async def wait_for_capacity(self, need: int = 1) -> None:
        """Until the next claim may take ``need`` rows (or nothing is running to free any)."""
        while True:
            self.start_ready()
            if self.room() >= need:
                return
            busy = self._executor.in_flight or self._completer.busy or self._claims
            if self._stopping.is_set() or not busy:
                return
            self._capacity.clear()
            await self._capacity.wait()

    def on_wakeup(self, earliest: datetime | None) -> None:
        """A store heard of new work; called on any thread (e.g. a sync App's own loop)."""
        self._clear_until = None
        self._hints += 1
        planned = self._planned_wake
        if earliest is None or planned is None or earliest < planned:
            loop = self._loop
            if loop is None or _on_loop(loop):
                self._wake.set()
            elif not loop.is_closed():
                loop.call_soon_threadsafe(self._wake.set)

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
        :data:`RATE_START_DELAY`)."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        # The rules first: read through the store's shared connections, they may wait behind
        # busy handlers, and a lease taken before that wait would be spent by the claim.
        plan = await self._rules(loop)
        now = self.clock.now()
        hold = target is not None and target > now
        cutoff = target if hold and target is not None else now
        lease_until = now + self.settings.lease
        paced: Mapping[int, datetime] = {}
        if plan.empty:
            # The rows due within the claim-ahead after the cutoff come too, each held until
            # its own instant (_take_claimed): timers due a millisecond apart (a stream of
            # requests, each due soon) then cost a claim a window, not a claim each.
            reach = cutoff + self._ahead()
            claimed = await self.store.claim_due(
                self.namespace,
                self.dispatch.claim_filter,
                reach,
                limit,
                self.shared.node_id,
                lease_until,
            )
        else:
            claimed, paced = await self._claim_under(plan, cutoff, limit, lease_until)
        return claimed, loop.time() - started, cutoff if hold else None, lease_until, paced

    async def _claim_under(
        self, plan: FlowPlan, cutoff: datetime, limit: int, lease_until: datetime
    ) -> tuple[list[Claimed], dict[int, datetime]]:
        """The claim under flow control rules (see ``store.limits.claim``), and the instant
        each row a rate granted may start."""
        hints, clear = self._hints, self._clear_until
        ungoverned = clear is None or cutoff >= clear
        limits, types = self.store.limits, self.dispatch.claim_filter
        ruled = await limits.claim(
            self.namespace,
            types,
            cutoff,
            limit,
            self.shared.node_id,
            lease_until,
            plan,
            ungoverned=ungoverned,
        )
        self._held, self._retry_at = ruled.held, ruled.retry_at
        for pattern in ruled.held:
            for observer in self.shared.observers:
                # Observers written before flow control have no such hook: they are left out.
                hook = getattr(observer, "held_back", None)
                try:
                    if hook is not None:
                        hook(self.namespace, pattern)
                except Exception:  # a metrics hook must not stop the claims
                    log.exception("a worker observer failed on a held-back limit")
        if ungoverned and ruled.ungoverned_short:
            every = tuple(g.rule.pattern for g in plan.limits)
            later = await limits.next_run_at(self.namespace, types, plan, every)
            if hints == self._hints:  # no hint meanwhile: what it says still holds
                self._clear_until = _NEVER if later is None else later
        delay = RATE_START_DELAY
        return ruled.claimed, {key: at + delay for key, at in ruled.granted_at.items()}

    async def _rules(self, loop: asyncio.AbstractEventLoop) -> FlowPlan:
        """The namespace's flow control rules, read again every :data:`RULES_REFRESH`."""
        now = loop.time()
        if now - self._plan_read >= RULES_REFRESH:
            self._plan_read = now
            try:
                plan = plan_of(await self.store.limits.list_rules(self.namespace, claiming=True))
            except Exception:
                log.exception("reading the flow control rules failed; using the last ones")
            else:
                if plan.empty:
                    self._held, self._retry_at = (), None
                self._plan, self._clear_until = plan, None
        return self._plan

    def _take_claimed(
        self,
        claimed: list[Claimed],
        elapsed: float,
        start_at: datetime | None,
        lease_until: datetime,
        paced: Mapping[int, datetime],
    ) -> list[Claimed]:
        """Start what a claim brought, as slots allow (the rest waits in order for a slot)."""
        loop = asyncio.get_running_loop()
        held = self.shared.leases.held(lease_until)
        self._claim_seconds.append(elapsed)
        self.shared.stats.claimed += len(claimed)
        if claimed:
            for observer in self.shared.observers:
                observer.claimed(self.namespace, len(claimed), elapsed)
        route = self.dispatch.target
        fans: list[tuple[Claimed, Fan]] = []
        pacing: dict[datetime, list[_Ready]] = {}  # rows a rate granted, by their instant
        free = self.free() if not self._ready else 0  # slots; the waiting rows go first
        start = self._executor.start
        now = self.clock.now()
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
                ready = _Ready(item, goes, start_at_row, held)
                pacing.setdefault(paced[item.timer.id], []).append(ready)
            elif free > 0:
                free -= 1
                self._started_count += 1
                start(item, goes, start_at_row, loop, held)
            else:
                self._ready.append(_Ready(item, goes, start_at_row, held))
        for at, readies in pacing.items():
            self._hold_paced(readies, at, loop)
        self.start_ready()
        if fans:
            task = loop.create_task(self._fan_outer.fan_out(fans))
            in_flight = self._executor.in_flight
            for item, _ in fans:
                in_flight[item.timer.id] = task
        return claimed

    def _hold_paced(
        self, readies: list[_Ready], at: datetime, loop: asyncio.AbstractEventLoop
    ) -> None:
        """Hold rows one grant of a rate gave until ``at`` (see :data:`RATE_START_DELAY`),
        then queue them for a slot (those not given back meanwhile, at shutdown)."""
        pacing = self._pacing
        for ready in readies:
            pacing[ready.claimed.timer.id] = ready

        def due() -> None:
            for ready in readies:
                if pacing.pop(ready.claimed.timer.id, None) is not None:
                    self._ready.append(ready)
            self.start_ready()

        loop.call_later(max(0.0, (at - self.clock.now()).total_seconds()), due)

    def fanned(self, fans: Sequence[tuple[Claimed, Fan]]) -> None:
        """A fan-out's batch is written (or failed): its rows' slots are free."""
        in_flight = self._executor.in_flight
        for claimed, _ in fans:
            in_flight.pop(claimed.timer.id, None)
        self._capacity.set()
        self.start_ready()

    def start_ready(self) -> None:
        """Start timers waiting for a slot (see :data:`PREFETCH_HORIZON`), oldest claim first,
        while slots are free."""
        ready = self._ready
        if not ready:
            return
        free = self.free()
        if free <= 0:
            return
        loop = asyncio.get_running_loop()
        start = self._executor.start
        usable = self.shared.leases.usable
        now = self.clock.now()
        stale = 0
        while ready and free > 0:
            item = ready.popleft()
            if not usable(item.held, now):
                stale += 1
                self._release(item.claimed)
                continue
            free -= 1
            self._started_count += 1
            start(item.claimed, item.target, item.start_at, loop, item.held)
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


_NEVER = datetime.max.replace(tzinfo=UTC)


def _later(first: datetime | None, second: datetime | None) -> datetime | None:
    if first is None or second is None:
        return first or second
    return max(first, second)


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
