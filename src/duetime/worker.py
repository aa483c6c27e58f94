"""The worker: claim due timers → run their handlers → record the outcomes, in batches.

It never polls on a fixed interval: it sleeps until the next due instant and is woken early when
a timer due sooner is stored (by this process or another). A bounded safety re-check runs anyway,
so a lost wake-up costs latency, never a timer. It knows the Store protocol and the handlers,
never SQL.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import os
import random
import socket
import uuid
from collections import Counter, deque
from collections.abc import Awaitable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol, cast

from duetime.backoff import Backoff
from duetime.clock import Clock, SystemClock, unwatch, watch
from duetime.config import Settings
from duetime.destinations.base import Destination
from duetime.dispatch import Dispatch, Target
from duetime.eventloop import start_task
from duetime.handlers import Event, Handler, HandlerRegistry
from duetime.model import Claimed, FanOut, Finish, Node, Outcome, Timer
from duetime.outcomes import Cancel, Dead, HandlerOutcome, Retry, Snooze
from duetime.routes import Fan, Route
from duetime.services.materializer import Materializer
from duetime.services.retention import Retention
from duetime.store.protocol import Store

log = logging.getLogger("duetime.worker")

MAX_ERROR_LENGTH = 2000
_TAKEN_OVER = Finish(0, 0, Outcome.LOST)
"""Marks an attempt another node took over before a transactional handler could commit."""

CLAIM_AHEAD = timedelta(milliseconds=25)
"""How long before a planned due instant the worker claims it, at least (real clocks only).

The claim is a durable (fsynced) write; made ahead, its latency — a fraction of a millisecond
on an idle SSD, tens on a busy disk — is not added to the timer's lateness: the claimed timers
are held in memory and their handlers start at the due instant, never before it. When recent
claims took longer, the worker claims twice their worst time ahead, up to
:data:`MAX_CLAIM_AHEAD`. (Meanwhile the timer shows as ``running``: cancelling it that close to
its due instant is a conflict, as it would be a moment later.)"""
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
WRITES_IN_FLIGHT = 2
"""Writes of outcomes a worker keeps under way at once (one transaction each).

An outcome write is the slowest step of a busy worker (it rewrites each row and waits for a
durable commit), and with one at a time the worker's outcomes queue behind it while the server
has a core to spare; with two, one write's commit overlaps the next one's work. Each write
takes every outcome waiting when it starts, so under light load there is still one a moment.
A second write starts beside one under way only once half a ``batch_size`` of outcomes wait:
a stream of small writes would cost the server more per outcome than it saves in waiting (when
the cores are busy anyway, it cost a tenth more CPU a job)."""
SWEEP_SCAN = 1000
"""Oldest overdue rows a no-subscriber sweep looks at: bounded, so a backlog costs it little."""


class WorkerObserver(Protocol):
    """Hooks for metrics: called on the event loop, must be quick and must not raise."""

    def claimed(self, namespace: str, count: int, seconds: float) -> None: ...

    def started(self, timer: Timer, attempt: int, lateness: timedelta) -> None: ...

    def finished(self, timer: Timer, outcome: Outcome) -> None: ...


@dataclass
class WorkerStats:
    """What this worker did since it started, by outcome."""

    claimed: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    lost: int = 0

    def total(self) -> int:
        return sum(self.outcomes.values())


def new_node_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class Worker:
    """Runs the handlers of one namespace. Start with :meth:`run`, stop with :meth:`stop`."""

    def __init__(
        self,
        store: Store,
        registry: HandlerRegistry,
        settings: Settings,
        clock: Clock,
        *,
        namespace: str | None = None,
        types: Sequence[str] | None = None,
        node_id: str | None = None,
        observers: Sequence[WorkerObserver] = (),
        rng: random.Random | None = None,
        claim_ahead: timedelta | None = None,
        materialize: bool = True,
        maintain: bool = True,
        routes: Sequence[Route] = (),
        destinations: Mapping[str, Destination] | None = None,
    ) -> None:
        """``types`` narrows the handlers it subscribes to (default: every registered one);
        ``routes`` send events to ``destinations`` (by name), fanning out where needed;
        ``maintain`` runs the retention step every ``settings.maintenance_interval``."""
        self.store = store
        self.registry = registry
        self.settings = settings
        self.clock = clock
        self.namespace = namespace or settings.namespace
        self.node_id = node_id or new_node_id()
        self.dispatch = Dispatch(
            self.namespace, self.node_id, registry, routes, destinations, types=types
        )
        self.claim_filter = self.dispatch.claim_filter
        self.observers = list(observers)
        self.backoff = Backoff(settings.backoff_base, settings.backoff_cap)
        self.stats = WorkerStats()
        self._rng = rng or random.Random()
        self._in_flight: dict[int, asyncio.Task[None]] = {}
        self._ready: deque[_Ready] = deque()  # claimed beyond the free slots, not started
        self._started_count = 0  # attempts started (the pace of PREFETCH_HORIZON) …
        self._pace_mark = (0, 0.0)  # … and (count, loop time) when the pace was last measured
        self._pace = 0.0  # attempts started per second, lately
        self._prefetch = 0  # rows a claim may take beyond the free slots (see _room)
        self._finishes: list[Finish] = []
        self._writes: dict[asyncio.Future[set[int]], list[Finish]] = {}  # under way: outcomes
        self._finish_waiting = asyncio.Event()
        self._write_slots = asyncio.Semaphore(WRITES_IN_FLIGHT)
        self._capacity = asyncio.Event()
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self._planned_wake: datetime | None = None
        self._target: datetime | None = None
        self._backlog = False
        # Pipelined claims under way, oldest first, each with the rows it may bring (counted
        # against the room for more).
        self._claims: dict[asyncio.Task[None], int] = {}
        if claim_ahead is None:
            # Only on the real clock: a test clock does not move while a held timer waits.
            claim_ahead = CLAIM_AHEAD if type(clock) is SystemClock else timedelta(0)
        self.claim_ahead = claim_ahead
        self._claim_seconds: deque[float] = deque(maxlen=32)  # how long recent claims took
        self._services: list[asyncio.Task[None]] = []
        self._fanned_out = 0  # events this worker fanned out
        self._started = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self.materializer: Materializer | None = (
            Materializer(store, clock, self.namespace) if materialize else None
        )
        self.retention: Retention | None = (
            Retention.from_settings(store, clock, settings) if maintain else None
        )

    # -- lifecycle --------------------------------------------------------------------------
    async def run(self) -> None:
        """Work until :meth:`stop`; then finish in-flight handlers (within the grace) and exit."""
        await self._start()
        if self.materializer is not None:
            self._services.append(
                asyncio.create_task(
                    self.materializer.run(self._stopping), name="duetime-materializer"
                )
            )
        if self.retention is not None:
            self._services.append(
                asyncio.create_task(self.retention.run(self._stopping), name="duetime-retention")
            )
        try:
            while not self._stopping.is_set():
                await self._cycle()
        finally:
            await self._shutdown()

    def stop(self) -> None:
        """Stop claiming; :meth:`run` returns once in-flight work is finished or released."""
        self._stopping.set()
        self._wake.set()
        self._capacity.set()

    @property
    def in_flight(self) -> int:
        """Timers this worker holds and has not recorded an outcome for: running, or claimed
        and waiting for a free slot."""
        return len(self._in_flight) + len(self._ready)

    def held(self) -> list[int]:
        """Ids of the timers this worker knows it holds: running, or with an outcome not yet
        recorded. Only these leases are renewed — a claim whose answer was lost (the connection
        died after the commit) is left to expire and be rescued, not kept alive forever."""
        return [
            *self._in_flight,
            *(r.claimed.timer.id for r in self._ready),
            *(f.timer_id for f in self._finishes),
            *(f.timer_id for batch in self._writes.values() for f in batch),
        ]

    def _free(self) -> int:
        """Slots for handlers to start in.

        ``concurrency`` bounds the handlers running at once. Their outcomes are written in
        batches while more handlers run; once ``batch_size`` outcomes wait for their write, every
        further one takes a slot until it is written. So a worker has at most ``concurrency +
        batch_size`` timers started and not recorded — the most that run again if it dies — and
        a slow store slows the handlers down instead of piling outcomes up in memory.
        """
        writing = sum(map(len, self._writes.values()))
        unwritten = len(self._finishes) + writing - self.settings.batch_size
        return self.settings.concurrency - len(self._in_flight) - max(0, unwritten)

    def _room(self) -> int:
        """Rows the next claim may take: the free slots, plus the prefetch allowance, less the
        rows already waiting for a slot and those the claims under way may bring."""
        claiming = sum(self._claims.values())
        return self._free() + self._prefetch - len(self._ready) - claiming

    async def tick(self) -> WorkerStats:
        """Fire everything due now once, wait for it to finish, and return what happened."""
        await self._start()
        try:  # from here on, whatever fails, the node deregisters and its listeners go
            if self.materializer is not None:
                await self.materializer.run_once()
            fanned = -1
            while fanned != self._fanned_out:  # deliveries made by a fan-out are due too
                fanned = self._fanned_out
                while True:
                    free = self._free()
                    if free <= 0:
                        await self._wait_for_capacity()
                        continue
                    claimed = await self._claim(min(self.settings.batch_size, free), None)
                    if len(claimed) < min(self.settings.batch_size, free):
                        break
                await self._drain(None)
        finally:
            await self._shutdown()
        return self.stats

    async def _start(self) -> None:
        if self._started:
            return
        self._started = True
        self._loop = asyncio.get_running_loop()
        now = self.clock.now()
        await self.store.register_node(
            Node(
                self.node_id,
                socket.gethostname(),
                os.getpid(),
                now,
                now,
                role="worker",
                subscriptions=self.dispatch.subscriptions,
            )
        )
        await self._rescue_dead_local_nodes()
        await self._refresh_subscriptions()
        await self._rescue()
        self._services = [
            *(
                asyncio.create_task(self._flush_loop(), name=f"duetime-flush-{lane}")
                for lane in range(WRITES_IN_FLIGHT)
            ),
            asyncio.create_task(self._heartbeat_loop(), name="duetime-heartbeat"),
            asyncio.create_task(self._rescue_loop(), name="duetime-rescue"),
        ]
        watch(self.clock, self._wake)  # undone in _shutdown: an app ticks many workers
        self.store.add_wakeup_listener(self._on_wakeup)

    async def _shutdown(self) -> None:
        if not self._started:
            return
        unwatch(self.clock, self._wake)
        self.store.remove_wakeup_listener(self._on_wakeup)
        if self._claims:  # their rows are started or given back like any others
            await asyncio.wait(list(self._claims))
        await self._drain(self.settings.shutdown_grace.total_seconds())
        for task in self._services:
            task.cancel()
        for task in self._services:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._services = []
        await self._flush_now()
        try:
            await self.store.deregister_node(self.node_id)
        except Exception:
            log.exception("could not deregister node %s", self.node_id)
        self._started = False

    async def _drain(self, grace: float | None) -> None:
        """Wait for in-flight handlers; after ``grace`` seconds cancel them (they retry later).
        Timers claimed but never started are given back as they were."""
        while self._ready:
            ready = self._ready.popleft()
            timer, attempt = ready.claimed.timer, ready.claimed.attempt
            self._record(timer, Finish(timer.id, attempt, Outcome.RELEASED))
        if self._in_flight:
            tasks = list(self._in_flight.values())
            _, pending = await asyncio.wait(tasks, timeout=grace)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)
        await self._flush_now()

    # -- the main cycle ---------------------------------------------------------------------
    async def _cycle(self) -> None:
        self._start_ready()
        target, self._target = self._target, None
        self._prefetch = 0 if target is not None else self._prefetch_allowance()
        room = self._room()
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
            await self._wait_for_capacity(1 if room <= 0 else need)
            return
        self._wake.clear()
        want = min(self.settings.batch_size, room)
        if self._backlog and target is None:
            self._claim_in_pipeline(want)
            return
        try:
            claimed = await self._claim(want, target)
        except Exception:
            log.exception("claiming due timers failed; retrying shortly")
            self._backlog = False
            await self._sleep(1.0)
            return
        self._backlog = len(claimed) == want
        if self._backlog:
            return  # there may be more due right now
        try:
            next_run = await self.store.next_run_at(self.namespace, self.claim_filter)
        except Exception:
            log.exception("reading the next due time failed; retrying shortly")
            await self._sleep(1.0)
            return
        now = self.clock.now()
        deadline = now + self.settings.recheck
        wake_at = deadline
        if next_run is not None and next_run < deadline:
            deadline = next_run
            wake_at = next_run - self._ahead()
        self._planned_wake = deadline
        woken = await self._sleep((wake_at - now).total_seconds())
        self._planned_wake = None
        if not woken and deadline == next_run and self.claim_ahead:
            self._target = deadline  # claim what is due then, now, and hold it until then

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

    async def _wait_for_capacity(self, need: int = 1) -> None:
        while True:
            self._start_ready()
            if self._room() >= need:
                return
            busy = self._in_flight or self._finishes or self._writes or self._claims
            if self._stopping.is_set() or not busy:
                return
            self._capacity.clear()
            await self._capacity.wait()

    def _on_wakeup(self, earliest: datetime | None) -> None:
        """A store heard of new work; called on any thread (e.g. a sync App's own loop)."""
        planned = self._planned_wake
        if earliest is None or planned is None or earliest < planned:
            loop = self._loop
            if loop is None or _on_loop(loop):
                self._wake.set()
            elif not loop.is_closed():
                loop.call_soon_threadsafe(self._wake.set)

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
        except Exception:  # as in _cycle: rows not started run out their lease, then retry
            log.exception("claiming due timers failed; retrying shortly")
            self._backlog = False  # the next claim is made alone (and waits if it fails)
        finally:
            self._claims.pop(cast(asyncio.Task[None], asyncio.current_task()), None)
            self._capacity.set()

    async def _claim(self, limit: int, target: datetime | None) -> list[Claimed]:
        """Claim what is due now, or if ``target`` is ahead, due by then (held until then)."""
        return self._take_claimed(*await self._fetch_claim(limit, target))

    async def _fetch_claim(
        self, limit: int, target: datetime | None
    ) -> tuple[list[Claimed], float, datetime | None]:
        """The store's claim: (rows, seconds it took, the instant to hold them until)."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        now = self.clock.now()
        hold = target is not None and target > now
        cutoff = target if hold and target is not None else now
        claimed = await self.store.claim_due(
            self.namespace,
            self.claim_filter,
            cutoff,
            limit,
            self.node_id,
            now + self.settings.lease,
        )
        return claimed, loop.time() - started, cutoff if hold else None

    def _take_claimed(
        self, claimed: list[Claimed], elapsed: float, start_at: datetime | None
    ) -> list[Claimed]:
        """Start what a claim brought, as slots allow (the rest waits in order for a slot)."""
        loop = asyncio.get_running_loop()
        self._claim_seconds.append(elapsed)
        self.stats.claimed += len(claimed)
        if claimed:
            for observer in self.observers:
                observer.claimed(self.namespace, len(claimed), elapsed)
        route = self.dispatch.target
        fans: list[tuple[Claimed, Fan]] = []
        free = self._free() if not self._ready else 0  # slots; the waiting rows go first
        begin = self._begin
        for item in claimed:
            goes = route(item.timer)
            if type(goes) is Fan:
                fans.append((item, goes))
            elif free > 0:
                free -= 1
                begin(item, goes, start_at, loop)
            else:
                self._ready.append(_Ready(item, goes, start_at))
        self._start_ready()
        if fans:
            task = loop.create_task(self._fan_out(fans))
            for item, _ in fans:
                self._in_flight[item.timer.id] = task
        return claimed

    def _start_ready(self) -> None:
        """Start timers waiting for a slot (see :data:`PREFETCH_HORIZON`), oldest claim first,
        while slots are free."""
        ready = self._ready
        if not ready:
            return
        free = self._free()
        if free <= 0:
            return
        loop = asyncio.get_running_loop()
        while ready and free > 0:
            item = ready.popleft()
            free -= 1
            self._begin(item.claimed, item.target, item.start_at, loop)

    def _begin(
        self,
        claimed: Claimed,
        target: Target,
        start_at: datetime | None,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        """Start one attempt: now, or (claimed ahead) held until ``start_at``."""
        self._started_count += 1
        if start_at is None:
            self._launch(claimed, loop, target)
        else:
            self._in_flight[claimed.timer.id] = loop.create_task(
                self._run_one(claimed, start_at, target=target)
            )

    def _launch(
        self, claimed: Claimed, loop: asyncio.AbstractEventLoop, target: Target = None
    ) -> None:
        """Start one attempt now: the hot path of a busy worker, so it avoids wrapping an async
        handler in more coroutines — the handler's own coroutine is the task."""
        timer, attempt = claimed.timer, claimed.attempt
        before = self._before(timer, attempt, target)
        if isinstance(before, Finish):
            self._record(timer, before)
        elif not before.is_async or before.transactional:
            self._in_flight[timer.id] = loop.create_task(self._run_one(claimed, None, before))
        else:
            try:
                coro = before.func(Event.from_timer(timer, attempt, before.destination))
            except Exception as exc:  # e.g. a handler that takes no argument
                self._record(timer, self._outcome(timer, attempt, None, exc))
                return
            task = start_task(loop, cast(Coroutine[Any, Any, Any], coro))
            if task.done():  # it never suspended (see start_task)
                self._handler_done(claimed, task)
                return
            task.add_done_callback(functools.partial(self._handler_done, claimed))
            self._in_flight[timer.id] = task

    def _handler_done(self, claimed: Claimed, task: asyncio.Task[Any]) -> None:
        timer, attempt = claimed.timer, claimed.attempt
        self._in_flight.pop(timer.id, None)
        self._capacity.set()
        if task.cancelled():
            finish = self._interrupted(timer, attempt)
        else:
            error = task.exception()
            finish = self._outcome(timer, attempt, None if error else task.result(), error)
        self._record(timer, finish)

    # -- one attempt ------------------------------------------------------------------------
    async def _run_one(
        self,
        claimed: Claimed,
        start_at: datetime | None = None,
        handler: Handler | None = None,
        *,
        target: Target = None,
    ) -> None:
        """One attempt, after waiting (when asked) for the instant it was claimed ahead of;
        ``handler`` when :meth:`_before` already ran, else ``target`` is where the row goes (see
        :meth:`Dispatch.target`)."""
        timer, attempt = claimed.timer, claimed.attempt
        started = False
        try:
            if start_at is not None:
                await self._hold(start_at)
            started = True
            before = handler or self._before(timer, attempt, target)
            if isinstance(before, Finish):
                finish: Finish | None = before
            else:
                finish = await self._invoke(before, timer, attempt)
        except asyncio.CancelledError:
            if started:
                finish = self._interrupted(timer, attempt)
            else:  # claimed ahead, never started: give it back as it was
                finish = Finish(timer.id, attempt, Outcome.RELEASED)
        finally:
            self._in_flight.pop(timer.id, None)
            self._capacity.set()
        if finish is _TAKEN_OVER:
            self._start_ready()
            return
        if finish is None:  # a transactional handler's completion committed with its writes
            self.stats.outcomes[Outcome.DONE.value] += 1
            for observer in self.observers:
                observer.finished(timer, Outcome.DONE)
            self._start_ready()
            return
        self._record(timer, finish)

    def _record(self, timer: Timer, finish: Finish) -> None:
        """Queue an attempt's outcome for the next batched write."""
        self.stats.outcomes[finish.outcome.value] += 1
        for observer in self.observers:
            observer.finished(timer, finish.outcome)
        self._finishes.append(finish)
        self._finish_waiting.set()

    def _interrupted(self, timer: Timer, attempt: int) -> Finish:
        return Finish(
            timer.id,
            attempt,
            Outcome.RETRY,
            error="worker shut down before the handler finished",
            run_at=self.clock.now(),
        )

    async def _hold(self, until: datetime) -> None:
        """Sleep until ``until`` by the worker's clock (asyncio timers may fire a hair early)."""
        for _ in range(100):
            remaining = (until - self.clock.now()).total_seconds()
            if remaining <= 0:
                return
            await asyncio.sleep(remaining)

    def _before(self, timer: Timer, attempt: int, target: Target) -> Finish | Handler:
        """The handler to run now, or the outcome when there is none to run."""
        now = self.clock.now()
        if timer.expires_after is not None and now > timer.due_at + timer.expires_after:
            return _expired(timer, attempt, now)
        if not isinstance(target, Handler):  # None; a fan-out never comes this way
            return Finish(timer.id, attempt, Outcome.DEAD, error=self.dispatch.missing(timer))
        handler = target
        for observer in self.observers:
            observer.started(timer, attempt, now - timer.due_at)
        return handler

    async def _invoke(self, handler: Handler, timer: Timer, attempt: int) -> Finish | None:
        """Run the handler; None when a transactional handler already recorded its outcome."""
        event = Event.from_timer(timer, attempt, handler.destination)
        if handler.transactional:
            return await self._invoke_in_transaction(handler, event, timer, attempt)
        try:
            result: Any = await handler(event)
        except Exception as exc:
            return self._outcome(timer, attempt, None, exc)
        return self._outcome(timer, attempt, result, None)

    async def _invoke_in_transaction(
        self, handler: Handler, event: Event, timer: Timer, attempt: int
    ) -> Finish | None:
        """The handler's writes and the completion commit together (exactly-once effects).

        Any other outcome (an exception, Snooze, Dead…) rolls the handler's writes back and is
        recorded like any handler's.
        """
        returned: list[Any] = []

        def effect(connection: Any) -> Any:
            result = handler.func(event, connection)
            if inspect.isawaitable(result):
                return _keep_result(result, returned)
            returned.append(result)
            if isinstance(result, HandlerOutcome):
                raise result  # roll the writes back; recorded below
            return None

        try:
            ours = await self.store.transactions.complete_in_transaction(
                timer.id, attempt, self.node_id, self.clock.now(), effect
            )
        except Exception as exc:
            return self._outcome(timer, attempt, None, exc)
        if not ours:
            self.stats.lost += 1
            log.warning("attempt %d of %s was taken over; nothing was written", attempt, timer.key)
            return _TAKEN_OVER
        if returned and isinstance(returned[-1], HandlerOutcome):
            return self._explicit(returned[-1], timer, attempt)
        return None

    def _outcome(
        self, timer: Timer, attempt: int, result: Any, error: BaseException | None
    ) -> Finish:
        """What a handler's return value or exception means for its attempt."""
        if error is None:
            if isinstance(result, HandlerOutcome):
                return self._explicit(result, timer, attempt)
            return Finish(timer.id, attempt, Outcome.DONE)
        if isinstance(error, HandlerOutcome):
            return self._explicit(error, timer, attempt)
        text = _describe(error)
        log.warning("handler for %s (key %s) failed: %s", timer.type, timer.key, text)
        return self._failed(timer, attempt, text, None)

    def _explicit(self, outcome: HandlerOutcome, timer: Timer, attempt: int) -> Finish:
        if isinstance(outcome, Snooze):
            return Finish(
                timer.id, attempt, Outcome.SNOOZED, run_at=self.clock.now() + outcome.delay
            )
        if isinstance(outcome, Cancel):
            return Finish(timer.id, attempt, Outcome.CANCELLED, error=outcome.reason)
        if isinstance(outcome, Dead):
            return Finish(timer.id, attempt, Outcome.DEAD, error=outcome.reason)
        if isinstance(outcome, Retry):
            return self._failed(timer, attempt, outcome.reason, outcome.delay)
        return self._failed(timer, attempt, _describe(outcome), None)

    def _failed(self, timer: Timer, attempt: int, error: str, delay: timedelta | None) -> Finish:
        if attempt >= timer.max_attempts:
            return Finish(
                timer.id,
                attempt,
                Outcome.DEAD,
                error=f"gave up after {attempt} attempts: {error}"[:MAX_ERROR_LENGTH],
            )
        wait = delay if delay is not None else self.backoff.delay(attempt, self._rng)
        return Finish(timer.id, attempt, Outcome.RETRY, error=error, run_at=self.clock.now() + wait)

    # -- fanning out -------------------------------------------------------------------------
    async def _fan_out(self, fans: Sequence[tuple[Claimed, Fan]]) -> None:
        """Hand claimed events on as one delivery row per destination, in one transaction.

        An event already stale is expired instead. If the write fails the events retry with
        backoff; if this task is cancelled (shutdown) they are released. Both outcomes are
        fenced, so they are dropped as lost should the fan-out have committed after all.
        """
        now = self.clock.now()
        todo: list[FanOut] = []
        for claimed, fan in fans:
            timer = claimed.timer
            if timer.expires_after is not None and now > timer.due_at + timer.expires_after:
                self._record(timer, _expired(timer, claimed.attempt, now))
            else:
                todo.append(FanOut(timer.id, claimed.attempt, timer.key, fan.destinations))
        wanted = {f.timer_id for f in todo}
        try:
            lost = await self.store.fan_out(todo, self.node_id, now) if todo else set()
        except asyncio.CancelledError:
            for claimed, _ in fans:
                if claimed.timer.id in wanted:
                    released = Finish(claimed.timer.id, claimed.attempt, Outcome.RELEASED)
                    self._record(claimed.timer, released)
            raise
        except Exception as exc:
            log.exception("fanning out %d events failed; they will be retried", len(todo))
            error = f"fan-out failed: {_describe(exc)}"
            for claimed, _ in fans:
                if claimed.timer.id in wanted:
                    failed = self._failed(claimed.timer, claimed.attempt, error, None)
                    self._record(claimed.timer, failed)
            return
        finally:
            for claimed, _ in fans:
                self._in_flight.pop(claimed.timer.id, None)
            self._capacity.set()
            self._start_ready()
        handed = [f for f in todo if f.timer_id not in lost]
        if handed:
            self._fanned_out += len(handed)
            self.stats.outcomes[Outcome.FANNED_OUT.value] += len(handed)
        if lost:
            self.stats.lost += len(lost)
            log.warning(
                "%d events had been taken over by other nodes before fanning out", len(lost)
            )
        if self.observers:
            by_id = {claimed.timer.id: claimed.timer for claimed, _ in fans}
            for f in handed:
                for observer in self.observers:
                    observer.finished(by_id[f.timer_id], Outcome.FANNED_OUT)

    async def _refresh_subscriptions(self) -> None:
        """Read the live nodes' subscriptions: where events are routed from now on."""
        nodes = await self.store.list_nodes()
        self.dispatch.refresh(nodes, self.clock.now(), self.settings.lease)

    async def _sweep_unsubscribed(self) -> None:
        """Dead-letter pending rows overdue by the grace that no live node takes."""
        grace = self.settings.no_subscriber_grace
        if grace <= timedelta(0):
            return
        await self._refresh_subscriptions()
        now = self.clock.now()
        swept = await self.store.sweep_unsubscribed(
            self.namespace, self.dispatch.everyone(), now - grace, now, SWEEP_SCAN
        )
        if swept:
            log.warning(
                "dead-lettered %d timers of namespace %s that no live node subscribes to",
                len(swept),
                self.namespace,
            )

    # -- background duties ------------------------------------------------------------------
    async def _flush_loop(self) -> None:
        """One of :data:`WRITES_IN_FLIGHT` lanes writing outcomes as they come."""
        overlap_from = max(1, self.settings.batch_size // 2)
        while True:
            await self._finish_waiting.wait()
            if not self._worth_writing(overlap_from):
                self._finish_waiting.clear()  # the write under way takes them when it ends
                continue
            await self._write_waiting(overlap_from)

    async def _flush_now(self) -> None:
        """Write every finished attempt so far, and wait for the writes already under way."""
        while True:
            await self._write_waiting()
            if not self._writes:
                return
            await asyncio.wait(list(self._writes))  # a failed one puts its outcomes back

    def _worth_writing(self, overlap_from: int) -> bool:
        """Outcomes wait, and enough of them if another write is under way."""
        return len(self._finishes) >= (overlap_from if self._writes else 1)

    async def _write_waiting(self, overlap_from: int = 1) -> None:
        """Write the outcomes waiting, in one transaction a batch; keep them if it fails. While
        another write is under way, only ``overlap_from`` or more (that write takes the rest).

        A write already sent is never abandoned half-way: cancelling the caller waits for it
        (shielded), so shutting down cannot drop outcomes that were taken off the queue.
        """
        async with self._write_slots:
            while self._worth_writing(overlap_from):
                self._finish_waiting.clear()
                batch, self._finishes = self._finishes, []
                write = asyncio.ensure_future(
                    self.store.finish(batch, self.node_id, self.clock.now())
                )
                self._writes[write] = batch
                self._capacity.set()
                self._start_ready()
                try:
                    lost: set[int] | None = await asyncio.shield(write)
                except asyncio.CancelledError:
                    with contextlib.suppress(Exception):
                        await write
                    if not write.done() or write.exception() is not None:
                        self._finishes[:0] = batch
                    raise
                except Exception:
                    log.exception("recording %d outcomes failed; will retry", len(batch))
                    self._finishes[:0] = batch
                    lost = None
                finally:
                    del self._writes[write]  # written, or back in self._finishes
                    self._capacity.set()
                if lost is None:
                    self._finish_waiting.set()
                    await asyncio.sleep(0.5)
                    continue
                self._start_ready()
                if lost:
                    self.stats.lost += len(lost)
                    log.warning(
                        "%d attempts had been taken over by other nodes (lease expired); "
                        "their outcomes were not recorded",
                        len(lost),
                    )

    async def _heartbeat_loop(self) -> None:
        interval = self.settings.heartbeat.total_seconds()
        while True:
            await asyncio.sleep(interval)
            now = self.clock.now()
            try:
                await self.store.heartbeat(
                    self.node_id, now, now + self.settings.lease, self.held()
                )
            except Exception:
                log.exception("heartbeat failed; leases are not being renewed")
            try:
                await self._refresh_subscriptions()
            except Exception:
                log.exception("reading the nodes' subscriptions failed; routing as before")

    async def _rescue_loop(self) -> None:
        interval = self.settings.rescue_interval.total_seconds()
        while True:
            await asyncio.sleep(interval)
            try:
                await self._rescue()
            except Exception:
                log.exception("rescuing expired leases failed")
            try:
                await self._sweep_unsubscribed()
            except Exception:
                log.exception("dead-lettering unsubscribed timers failed")

    async def _rescue(self) -> None:
        rescued = await self.store.rescue(self.clock.now())
        if rescued:
            log.warning("rescued %d timers whose lease had expired", len(rescued))

    async def _rescue_dead_local_nodes(self) -> None:
        """Nodes on this host whose process is gone cannot renew leases: end them now."""
        host = socket.gethostname()
        for node in await self.store.list_nodes():
            if node.host != host or node.id == self.node_id or _process_alive(node.pid):
                continue
            ended = await self.store.expire_leases_of(node.id, self.clock.now())
            await self.store.deregister_node(node.id)
            if ended:
                log.warning(
                    "node %s (pid %d) is gone; rescuing its %d timers", node.id, node.pid, ended
                )


def _expired(timer: Timer, attempt: int, now: datetime) -> Finish:
    return Finish(
        timer.id,
        attempt,
        Outcome.EXPIRED,
        error=f"stale: due {timer.due_at.isoformat()}, "
        f"found {now - timer.due_at} late (expires_after {timer.expires_after})",
    )


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text[:MAX_ERROR_LENGTH]


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


async def _keep_result(awaitable: Awaitable[Any], returned: list[Any]) -> None:
    """Await an async transactional handler; an explicit outcome rolls its writes back."""
    result = await awaitable
    returned.append(result)
    if isinstance(result, HandlerOutcome):
        raise result


@dataclass(frozen=True, slots=True)
class _Ready:
    """A claimed timer waiting for a free slot: where it goes, and the instant it was claimed
    ahead of (None: start it at once)."""

    claimed: Claimed
    target: Target
    start_at: datetime | None
