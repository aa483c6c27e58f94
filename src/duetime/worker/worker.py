"""The worker: claim due timers → run their handlers → record the outcomes, in batches.

A :class:`Worker` is a line of parts on one event loop, each handing what it made to the next:
the :class:`~.producer.Producer` claims (through the :class:`~.flow.FlowGate` while flow
control rules are in force) → the :class:`~.starter.Starter` starts what the claims bring →
the :class:`~.executor.Executor` runs one attempt (or the :class:`~.fanout.FanOuter` hands an
event on to destinations) → the :class:`~.completer.Completer` writes the outcomes back. Each
reports the slots it holds to the :class:`~.slots.Slots`, the one account of them, whose events
tell the starter and the producer that a slot may be free; nothing calls back up the line.
Each part keeps its own counts, which :attr:`Worker.stats` assembles. Beside the line run the
node's services (heartbeat, rescue, sweeps, schedules, retention), which the app builds and
the worker starts and stops around its own loop. It knows the Store protocol and the handlers,
never SQL.
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, TypeVar

from duetime.bus.routes import Route
from duetime.clock import Clock, is_real, unwatch, watch
from duetime.config import Settings
from duetime.destinations.base import Destination
from duetime.dispatch import Dispatch
from duetime.handlers import HandlerRegistry
from duetime.model import HeldRow, Outcome
from duetime.services.base import Service, ServiceGroup
from duetime.services.startup import until_available
from duetime.store.protocol import Store
from duetime.timemath.backoff import Backoff
from duetime.worker.claim_timing import CLAIM_AHEAD
from duetime.worker.completer import Completer
from duetime.worker.destination_limits import keep_destination_limits
from duetime.worker.executor import Executor
from duetime.worker.fanout import FanOuter
from duetime.worker.flow import FlowGate
from duetime.worker.leases import Leases
from duetime.worker.observing import WorkerObserver, WorkerStats, with_defaults
from duetime.worker.producer import Producer
from duetime.worker.shared import Shared
from duetime.worker.slots import Slots
from duetime.worker.starter import Starter

if TYPE_CHECKING:
    from duetime.observability.otel import Tracing

S = TypeVar("S", bound=Service)


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
        routes: Sequence[Route] = (),
        destinations: Mapping[str, Destination] | None = None,
        tracing: Tracing | None = None,
    ) -> None:
        """``types`` narrows the handlers it subscribes to (default: every registered one);
        ``routes`` send events to ``destinations`` (by name), fanning out where needed. The
        node's services are added with :meth:`add_services` (``AsyncApp.worker`` does).
        ``tracing``: each attempt runs in an OpenTelemetry span (None: no tracing work at all)."""
        self.store = store
        self.registry = registry
        self.settings = settings
        self.clock = clock
        self.namespace = namespace or settings.namespace
        self.node_id = node_id or new_node_id()
        self.dispatch = Dispatch(
            self.namespace, self.node_id, registry, routes, destinations, types=types
        )
        self._destinations = list((destinations or {}).values())
        self.observers = [with_defaults(observer) for observer in observers]
        self.services: list[Service] = []
        if claim_ahead is None:
            # Only on the real clock: a test clock does not move while a held timer waits.
            claim_ahead = CLAIM_AHEAD if is_real(clock) else timedelta(0)
        self._wake = asyncio.Event()  # a wake-up hint, or stop
        self._stopping = asyncio.Event()
        self.leases = Leases(settings.lease)
        shared = Shared(store, clock, self.node_id, self.observers, self.leases, tracing)
        self._owner = shared.owner
        # The line, built from its end: each part is handed the parts it hands forward to.
        self.slots = Slots(settings.concurrency, settings.batch_size, shared.owner)
        self.completer = Completer(shared, self.slots, settings.batch_size)
        self.executor = Executor(
            shared,
            self.slots,
            self.dispatch,
            Backoff(settings.backoff_base, settings.backoff_cap),
            rng or random.Random(),
            self.completer,
        )
        self.fan_outer = FanOuter(shared, self.slots, self.completer, self.executor.retry_delay)
        self.starter = Starter(
            shared, self.slots, self.dispatch, self.executor, self.fan_outer, self.completer
        )
        self.gate = FlowGate(shared, self.namespace, self.dispatch)
        self.producer = Producer(
            shared,
            self.slots,
            self.starter,
            self.gate,
            settings,
            self.namespace,
            self.dispatch,
            claim_ahead,
            self._wake,
            self._stopping,
        )
        self._group: ServiceGroup | None = None

    @property
    def running(self) -> bool:
        """Started and not stopped (the liveness a health check reports)."""
        return self._group is not None

    def add_services(self, services: Sequence[Service]) -> None:
        """Duties to run beside the worker, started in this order before its first claim."""
        self.services.extend(services)

    def service(self, kind: type[S]) -> S | None:
        """The first service of ``kind``, if any (to look at what it did)."""
        return next((s for s in self.services if isinstance(s, kind)), None)

    # -- lifecycle --------------------------------------------------------------------------
    async def run(self) -> None:
        """Work until :meth:`stop`; then finish in-flight handlers (within the grace) and exit."""
        group = await self._start(wait=True)
        if group is None:
            return  # stopped while waiting for the database: nothing was started
        try:
            group.run()
            while not self._stopping.is_set():
                await self.producer.cycle()
        finally:
            await self._shutdown(group)

    def stop(self) -> None:
        """Stop claiming; :meth:`run` returns once in-flight work is finished or released."""
        self._stopping.set()
        self._wake.set()
        self.slots.capacity.set()

    async def tick(self) -> WorkerStats:
        """Fire everything due now once, wait for it to finish, and return what happened."""
        # A one-shot does not wait for the database: its caller (cron) runs it again later.
        group = await self._start(wait=False)
        assert group is not None
        try:  # from here on, whatever fails, the node deregisters and its listeners go
            await group.once()
            group.run()
            producer, slots, batch_size = self.producer, self.slots, self.settings.batch_size
            fanned = -1
            while fanned != self.fan_outer.fanned_out:  # deliveries made by a fan-out are due
                fanned = self.fan_outer.fanned_out
                while True:
                    free = slots.free()
                    if free <= 0:
                        await producer.wait_for_capacity()
                        continue
                    claimed = await producer.claim(min(batch_size, free), None)
                    if len(claimed) < min(batch_size, free):
                        break
                await self._drain(None)
        finally:
            await self._shutdown(group)
        return self.stats

    @property
    def stats(self) -> WorkerStats:
        """What this worker did so far: each part keeps its own counts, assembled here (the one
        place that does) into one view."""
        outcomes = self.completer.outcomes.copy()
        if self.executor.committed:
            outcomes[Outcome.DONE.value] += self.executor.committed
        if self.fan_outer.fanned_out:
            outcomes[Outcome.FANNED_OUT.value] += self.fan_outer.fanned_out
        lost = self.completer.lost + self.executor.lost + self.fan_outer.lost
        return WorkerStats(self.producer.claimed, outcomes, lost)

    @property
    def in_flight(self) -> int:
        """Timers this worker holds and has not recorded an outcome for: running, or claimed
        and waiting for a free slot."""
        return self.slots.in_flight + self.starter.waiting

    def held(self) -> list[HeldRow]:
        """The timers this worker knows it holds (id and claim token): running, or with an
        outcome not yet recorded. Only these leases are renewed — a claim whose answer was lost
        (the connection died after the commit) is left to expire and be rescued, not kept alive
        forever; nor is a row claimed again under another token."""
        return [*self.slots.held(), *self.starter.held(), *self.completer.held()]

    def held_now(self) -> tuple[list[HeldRow], int]:
        """What a heartbeat renews: the ids :meth:`held` lists, with the mark that tells later
        whether a row was among them (see :class:`~.leases.Leases`)."""
        return self.held(), self.leases.mark()

    def renewed(self, mark: int, until: datetime) -> None:
        """Every lease the heartbeat of ``mark`` listed now runs until ``until``."""
        self.leases.renewed(mark, until)

    async def _start(self, *, wait: bool) -> ServiceGroup | None:
        """Start the services; ``wait``: while the database is unavailable, retry with backoff
        until it answers (None: stopped meanwhile) rather than fail."""
        if self._group is not None:
            raise RuntimeError("this worker is already running")
        self._owner.bind(asyncio.get_running_loop())  # its state is this loop's from now on
        group = ServiceGroup(self.services)

        async def begin() -> None:
            now = self.clock.now()
            await keep_destination_limits(self.store, self.namespace, self._destinations, now)
            await group.start()  # all or nothing: a failed start may be tried again

        if not wait:
            await begin()
        elif not await until_available(begin, f"worker {self.node_id}", self._stopping):
            return None
        self._group = group
        self.producer.start()
        self.starter.start()
        self.completer.start()
        watch(self.clock, self._wake)  # undone in _shutdown: an app ticks many workers
        self.store.add_wakeup_listener(self.producer.on_wakeup)
        return group

    async def _shutdown(self, group: ServiceGroup) -> None:
        unwatch(self.clock, self._wake)
        self.store.remove_wakeup_listener(self.producer.on_wakeup)
        try:
            await self.producer.settle()
            await self._drain(self.settings.shutdown_grace.total_seconds())
            await group.stop()  # heartbeats renewed the leases while handlers finished
            await self.completer.stop()
        finally:
            await self.starter.stop()
            await group.close()  # e.g. deregister the node
            self._group = None

    async def _drain(self, grace: float | None) -> None:
        """Wait for in-flight handlers; after ``grace`` seconds cancel them (they retry later).
        Timers claimed but never started are given back as they were."""
        self.starter.release_waiting()
        await self.slots.drain(grace)
        await self.completer.flush()
