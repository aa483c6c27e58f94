"""The worker: claim due timers → run their handlers → record the outcomes, in batches.

It never polls on a fixed interval: it sleeps until the next due instant and is woken early when
a timer due sooner is stored (by this process or another). A bounded safety re-check runs anyway,
so a lost wake-up costs latency, never a timer. It knows the Store protocol and the handlers,
never SQL.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import socket
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from duetime.backoff import Backoff
from duetime.clock import Clock
from duetime.config import Settings
from duetime.handlers import Event, Handler, HandlerRegistry
from duetime.model import Claimed, Finish, Node, Outcome, Timer
from duetime.outcomes import Cancel, Dead, HandlerOutcome, Retry, Snooze
from duetime.store.protocol import Store

log = logging.getLogger("duetime.worker")

MAX_ERROR_LENGTH = 2000


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
    ) -> None:
        self.store = store
        self.registry = registry
        self.settings = settings
        self.clock = clock
        self.namespace = namespace or settings.namespace
        self.types: list[str] | None = list(types) if types is not None else registry.types
        self.node_id = node_id or new_node_id()
        self.observers = list(observers)
        self.backoff = Backoff(settings.backoff_base, settings.backoff_cap)
        self.stats = WorkerStats()
        self._rng = rng or random.Random()
        self._in_flight: dict[int, asyncio.Task[None]] = {}
        self._finishes: list[Finish] = []
        self._finish_waiting = asyncio.Event()
        self._flush_lock = asyncio.Lock()
        self._capacity = asyncio.Event()
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self._planned_wake: datetime | None = None
        self._services: list[asyncio.Task[None]] = []
        self._started = False
        subscribe = getattr(clock, "subscribe", None)
        if subscribe is not None:
            subscribe(self._wake)
        store.add_wakeup_listener(self._on_wakeup)

    # -- lifecycle --------------------------------------------------------------------------
    async def run(self) -> None:
        """Work until :meth:`stop`; then finish in-flight handlers (within the grace) and exit."""
        await self._start()
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
        return len(self._in_flight)

    async def tick(self) -> WorkerStats:
        """Fire everything due now once, wait for it to finish, and return what happened."""
        await self._start()
        try:
            while True:
                free = self.settings.concurrency - len(self._in_flight)
                if free <= 0:
                    await self._wait_for_capacity()
                    continue
                claimed = await self._claim(min(self.settings.batch_size, free))
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
        now = self.clock.now()
        await self.store.register_node(
            Node(self.node_id, socket.gethostname(), os.getpid(), now, now, role="worker")
        )
        await self._rescue_dead_local_nodes()
        await self._rescue()
        self._services = [
            asyncio.create_task(self._flush_loop(), name="duetime-flush"),
            asyncio.create_task(self._heartbeat_loop(), name="duetime-heartbeat"),
            asyncio.create_task(self._rescue_loop(), name="duetime-rescue"),
        ]

    async def _shutdown(self) -> None:
        if not self._started:
            return
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
        """Wait for in-flight handlers; after ``grace`` seconds cancel them (they retry later)."""
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
        free = self.settings.concurrency - len(self._in_flight)
        if free <= 0:
            await self._wait_for_capacity()
            return
        self._wake.clear()
        want = min(self.settings.batch_size, free)
        try:
            claimed = await self._claim(want)
        except Exception:
            log.exception("claiming due timers failed; retrying shortly")
            await self._sleep(1.0)
            return
        if len(claimed) == want:
            return  # there may be more due right now
        try:
            next_run = await self.store.next_run_at(self.namespace, self.types)
        except Exception:
            log.exception("reading the next due time failed; retrying shortly")
            await self._sleep(1.0)
            return
        now = self.clock.now()
        deadline = now + self.settings.recheck
        if next_run is not None and next_run < deadline:
            deadline = next_run
        self._planned_wake = deadline
        await self._sleep((deadline - now).total_seconds())
        self._planned_wake = None

    async def _sleep(self, seconds: float) -> None:
        if seconds <= 0 or self._wake.is_set():
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout=seconds)

    async def _wait_for_capacity(self) -> None:
        self._capacity.clear()
        if len(self._in_flight) >= self.settings.concurrency and not self._stopping.is_set():
            await self._capacity.wait()

    def _on_wakeup(self, earliest: datetime | None) -> None:
        planned = self._planned_wake
        if earliest is None or planned is None or earliest < planned:
            self._wake.set()

    async def _claim(self, limit: int) -> list[Claimed]:
        loop = asyncio.get_running_loop()
        started = loop.time()
        now = self.clock.now()
        claimed = await self.store.claim_due(
            self.namespace, self.types, now, limit, self.node_id, now + self.settings.lease
        )
        elapsed = loop.time() - started
        self.stats.claimed += len(claimed)
        if claimed:
            for observer in self.observers:
                observer.claimed(self.namespace, len(claimed), elapsed)
        for item in claimed:
            task = asyncio.create_task(self._run_one(item))
            self._in_flight[item.timer.id] = task
        return claimed

    # -- one attempt ------------------------------------------------------------------------
    async def _run_one(self, claimed: Claimed) -> None:
        timer, attempt = claimed.timer, claimed.attempt
        try:
            finish = await self._attempt(timer, attempt)
        except asyncio.CancelledError:
            finish = Finish(
                timer.id,
                attempt,
                Outcome.RETRY,
                error="worker shut down before the handler finished",
                run_at=self.clock.now(),
            )
        finally:
            self._in_flight.pop(timer.id, None)
            self._capacity.set()
        self.stats.outcomes[finish.outcome.value] += 1
        for observer in self.observers:
            observer.finished(timer, finish.outcome)
        self._finishes.append(finish)
        self._finish_waiting.set()

    async def _attempt(self, timer: Timer, attempt: int) -> Finish:
        now = self.clock.now()
        if timer.expires_after is not None and now > timer.due_at + timer.expires_after:
            return Finish(
                timer.id,
                attempt,
                Outcome.EXPIRED,
                error=f"stale: due {timer.due_at.isoformat()}, "
                f"found {now - timer.due_at} late (expires_after {timer.expires_after})",
            )
        handler = self.registry.get(timer.type)
        if handler is None:
            return Finish(
                timer.id,
                attempt,
                Outcome.DEAD,
                error=f"no handler is registered for event type {timer.type!r}",
            )
        for observer in self.observers:
            observer.started(timer, attempt, now - timer.due_at)
        return await self._invoke(handler, timer, attempt)

    async def _invoke(self, handler: Handler, timer: Timer, attempt: int) -> Finish:
        event = Event.from_timer(timer, attempt)
        try:
            result: Any = await handler(event)
        except HandlerOutcome as outcome:
            return self._explicit(outcome, timer, attempt)
        except Exception as exc:
            error = _describe(exc)
            log.warning("handler for %s (key %s) failed: %s", timer.type, timer.key, error)
            return self._failed(timer, attempt, error, None)
        if isinstance(result, HandlerOutcome):
            return self._explicit(result, timer, attempt)
        return Finish(timer.id, attempt, Outcome.DONE)

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

    # -- background duties ------------------------------------------------------------------
    async def _flush_loop(self) -> None:
        while True:
            await self._finish_waiting.wait()
            await self._flush_now()

    async def _flush_now(self) -> None:
        """Write every finished attempt so far in one transaction; keep them if it fails.

        A write already sent is never abandoned half-way: cancelling the caller waits for it
        (shielded), so shutting down cannot drop outcomes that were taken off the queue.
        """
        async with self._flush_lock:
            while self._finishes:
                self._finish_waiting.clear()
                batch, self._finishes = self._finishes, []
                write = asyncio.ensure_future(
                    self.store.finish(batch, self.node_id, self.clock.now())
                )
                try:
                    lost = await asyncio.shield(write)
                except asyncio.CancelledError:
                    with contextlib.suppress(Exception):
                        await write
                    if not write.done() or write.exception() is not None:
                        self._finishes[:0] = batch
                    raise
                except Exception:
                    log.exception("recording %d outcomes failed; will retry", len(batch))
                    self._finishes[:0] = batch
                    self._finish_waiting.set()
                    await asyncio.sleep(0.5)
                    continue
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
                    self.node_id, now, now + self.settings.lease, len(self._in_flight)
                )
            except Exception:
                log.exception("heartbeat failed; leases are not being renewed")

    async def _rescue_loop(self) -> None:
        interval = self.settings.rescue_interval.total_seconds()
        while True:
            await asyncio.sleep(interval)
            try:
                await self._rescue()
            except Exception:
                log.exception("rescuing expired leases failed")

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
