"""A service: one background duty of a working node, beside the worker's own loop.

Each is started before the worker's first claim (:meth:`Service.start`: e.g. register the node,
rescue what a dead one left), runs until stopped (:meth:`Service.run`), and is closed after the
worker's last outcome is written (:meth:`Service.close`: e.g. deregister). ``duetime tick``
calls :meth:`Service.once` instead of waiting for a round (e.g. materialise schedules now).
"""

from __future__ import annotations

import abc
import asyncio
import logging
from collections.abc import Iterable, Sequence

log = logging.getLogger("duetime.services")


class Service:
    """Does nothing by default: a duty overrides what it needs."""

    name = "service"

    async def start(self) -> None:
        """Before the worker's first claim."""

    async def run(self, stop: asyncio.Event) -> None:
        """Beside the worker, until ``stop`` is set (or the task is cancelled)."""

    async def once(self) -> None:
        """One round now, before a ``tick`` claims (default: nothing)."""

    async def close(self) -> None:
        """After the worker's last outcome is written."""


class Periodic(Service, abc.ABC):
    """Calls :meth:`step` every ``interval`` seconds; a failing step is logged and retried at
    the next round (or after :attr:`retry_after`, when shorter), never ends the loop."""

    failure = "a background duty failed"
    retry_after: float | None = None
    """Seconds to the next round after a failed one (None: ``interval``): for a duty whose
    result matters most right after an outage."""
    steady = False
    """Rounds begin every ``interval`` from the start of the last one, however long it took
    (True), rather than ``interval`` after it ended: for a duty whose rounds must not drift
    apart on a slow moment, as a heartbeat renewing leases against a deadline."""

    def __init__(self, interval: float) -> None:
        if not interval > 0:
            raise ValueError("the interval must be positive")
        self.interval = interval

    @abc.abstractmethod
    async def step(self) -> None:
        """One round of the duty."""

    async def run(self, stop: asyncio.Event) -> None:
        """The rounds; of failures in a row only the first is logged with its traceback (an
        outage would otherwise log one every :attr:`retry_after`)."""
        loop = asyncio.get_running_loop()
        wait = self.interval
        failures = 0
        while not await _stopped_within(stop, wait):
            began = loop.time()
            try:
                await self.step()
            except Exception as exc:
                failures += 1
                wait = min(self.interval, self.retry_after or self.interval)
                if failures == 1:
                    log.exception("%s; retrying in %gs", self.failure, wait)
                else:
                    log.debug("%s again (%d in a row): %s", self.failure, failures, exc)
                continue
            if failures:
                log.info("%s: working again after %d failed rounds", self.name, failures)
            failures, wait = 0, self.interval
            if self.steady:
                wait = max(0.0, began + self.interval - loop.time())


async def _stopped_within(stop: asyncio.Event, seconds: float) -> bool:
    """Wait up to ``seconds``; True when ``stop`` was set meanwhile."""
    try:
        await asyncio.wait_for(stop.wait(), timeout=seconds)
    except TimeoutError:
        return stop.is_set()
    return True


class ServiceGroup:
    """Starts, runs, stops and closes services in order, each on its own task."""

    def __init__(self, services: Sequence[Service]) -> None:
        self.services = list(services)
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        """Start each in order; when one fails, those already started are closed again (e.g.
        the node deregisters), so that starting the group may simply be tried again."""
        started: list[Service] = []
        try:
            for service in self.services:
                await service.start()
                started.append(service)
        except BaseException:
            await _close_all(reversed(started))
            raise

    async def once(self) -> None:
        for service in self.services:
            await service.once()

    def run(self) -> None:
        self._stop = asyncio.Event()
        self._tasks = [
            asyncio.create_task(service.run(self._stop), name=f"duetime-{service.name}")
            for service in self.services
        ]

    async def stop(self) -> None:
        self._stop.set()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except asyncio.CancelledError:
                pass
            except Exception:
                log.exception("%s failed", task.get_name())
        self._tasks = []

    async def close(self) -> None:
        """Close every service, last started first; one failing does not stop the others."""
        await _close_all(reversed(self.services))


async def _close_all(services: Iterable[Service]) -> None:
    """Close each of ``services`` in this order; one failing does not stop the others."""
    for service in services:
        try:
            await service.close()
        except Exception:
            log.exception("closing %s failed", service.name)
