"""Running one process's work: workers, broker sources and node services, started and stopped
in one order whoever runs them — ``App.run_worker``, ``duetime worker``, ``duetime serve`` and
:func:`duetime.sources.run_worker_with_sources` all come here.

Order matters at both ends. At start: the services (e.g. the API's own node), then the workers,
then the sources, so no message is taken in before something can fire it. At stop: the sources
first (a message taken in after the workers stopped would wait for the next start), then the
workers finish their in-flight handlers, then the services.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Protocol

from duetime.services.base import Service, ServiceGroup
from duetime.services.startup import until_available
from duetime.support import eventloop
from duetime.worker import Worker, WorkerStats

if TYPE_CHECKING:
    from duetime.app.facade import AsyncApp
    from duetime.observability.metrics import Metrics

log = logging.getLogger("duetime.app.runner")


class Intake(Protocol):
    """Messages taken in from brokers and stored through an app, run beside the workers.

    :class:`duetime.sources.SourceIntake` is the one duetime has; the runner knows only this
    much of it, so running a process does not depend on the broker clients."""

    @property
    def sources(self) -> Sequence[object]:
        """What it consumes, each with a ``name`` (and, when it counts, ``stats``)."""
        ...

    def describe(self) -> str:
        """One line for the log: where the messages go and where they come from."""
        ...

    async def open(self) -> None:
        """Be ready to store: raises here, before anything is consumed, when it cannot."""
        ...

    async def run(self, stop: asyncio.Event) -> None:
        """Consume until ``stop`` is set."""
        ...


class Runner:
    """Starts and stops workers, an intake of broker messages, and services."""

    def __init__(
        self,
        workers: Sequence[Worker] = (),
        *,
        intake: Intake | None = None,
        services: Sequence[Service] = (),
    ) -> None:
        self.workers = list(workers)
        self.intake = intake
        self._services = ServiceGroup(services)
        self._working: list[asyncio.Task[None]] = []
        self._consuming: asyncio.Task[None] | None = None
        self._sources_stop = asyncio.Event()
        self._started = False

    async def start(self) -> None:
        """Start everything; on a failure, what already started is stopped again."""
        self._started = True
        try:
            await self._services.start()
            self._services.run()
            self._working = [
                asyncio.create_task(worker.run(), name=f"duetime-worker-{worker.namespace}")
                for worker in self.workers
            ]
            if self.intake is not None:
                await self.intake.open()
                self._sources_stop = asyncio.Event()
                self._consuming = asyncio.create_task(
                    self.intake.run(self._sources_stop), name="duetime-sources"
                )
                self._consuming.add_done_callback(_log_failure)
                log.info("%s", self.intake.describe())
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> list[BaseException]:
        """Stop the sources, then the workers (in-flight work finishes), then the services;
        return the errors any of them ended with (each is logged too)."""
        if not self._started:
            return []
        self._started = False
        errors: list[BaseException] = []
        consuming, self._consuming = self._consuming, None
        if consuming is not None:
            self._sources_stop.set()
            (result,) = await asyncio.gather(consuming, return_exceptions=True)
            if (error := _failure(result)) is not None:  # logged by _log_failure
                errors.append(error)
        for worker in self.workers:
            worker.stop()
        ended = await asyncio.gather(*self._working, return_exceptions=True)
        for worker, result in zip(self.workers, ended, strict=False):
            if (error := _failure(result)) is not None:
                log.error("worker %s failed: %s", worker.node_id, error, exc_info=error)
                errors.append(error)
        self._working = []
        await self._services.stop()
        await self._services.close()
        return errors

    async def run(self, stop: asyncio.Event) -> None:
        """Start, work until ``stop`` is set or a worker or the sources end, then stop.

        If a worker fails, the sources are stopped too and the error is raised: storing timers
        that nothing fires would only hide the failure.
        """
        await self.start()
        stopping = asyncio.create_task(stop.wait())
        watched = {stopping, *self._working}
        if self._consuming is not None:
            watched.add(self._consuming)
        try:
            await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
            errors = await self.stop()
        if errors:
            raise errors[0]


def _observed(app: AsyncApp, intake: Intake | None) -> Metrics:
    """Metrics fed by ``app``'s workers (made after this) and ``intake``'s sources."""
    from duetime.observability.metrics import Metrics

    metrics = Metrics()
    app.observers.append(metrics)
    metrics.watch_clock(app.clock)
    metrics.watch_sources(() if intake is None else intake.sources)
    return metrics


def _failure(result: object) -> BaseException | None:
    """The error a task ended with, if it failed (being cancelled is not failing)."""
    if isinstance(result, BaseException) and not isinstance(result, asyncio.CancelledError):
        return result
    return None


def _log_failure(task: asyncio.Task[None]) -> None:
    """Say at once when the sources stopped on an error, not only at shutdown."""
    error = None if task.cancelled() else task.exception()
    if error is not None:
        log.error("sources stopped: %s", error, exc_info=error)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""What stops a worker process: its in-flight work finishes first."""


def run_process(
    app: AsyncApp,
    *,
    intake: Intake | None = None,
    node_id: str | None = None,
    metrics: tuple[str, int] | None = None,
) -> WorkerStats:
    """Run ``app``'s worker (and ``intake``'s sources) in this thread until SIGINT or SIGTERM;
    in-flight work is finished first. Returns what the worker did. ``metrics`` (host, port) serves
    the process's metrics and health there (:mod:`duetime.app.process_http`)."""

    async def main() -> WorkerStats:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        installed = []
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                loop.add_signal_handler(sig, stop.set)
                installed.append(sig)
        try:
            return await work(app, stop, intake=intake, node_id=node_id, metrics=metrics)
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)

    return eventloop.run(main())


async def work(
    app: AsyncApp,
    stop: asyncio.Event,
    *,
    intake: Intake | None = None,
    node_id: str | None = None,
    metrics: tuple[str, int] | None = None,
) -> WorkerStats:
    """:func:`run_process`'s work on the running loop, until ``stop`` is set; ``app`` is
    closed at the end. While the database is unavailable at start, it waits for it (a worker
    restarted during a database restart must not die of it)."""
    if not await until_available(app.open, "opening the store", stop):
        await app.close()
        return WorkerStats()
    served = None if metrics is None else _observed(app, intake)
    worker = app.worker(node_id=node_id)
    services: list[Service] = []
    if served is not None and metrics is not None:
        from duetime.app.process_http import MetricsServer

        host, port = metrics
        services.append(MetricsServer(app, served, host, port, alive=lambda: worker.running))
    runner = Runner([worker], intake=intake, services=services)
    try:
        await runner.run(stop)
    finally:
        await app.close()
    return worker.stats


@contextlib.contextmanager
def stopping_on_signals(stop: Callable[[], object]) -> Iterator[None]:
    """Call ``stop`` on SIGINT and SIGTERM meanwhile (in the main thread; elsewhere nothing
    changes), for a worker running on another thread's loop; the old handlers after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    for sig in STOP_SIGNALS:
        signal.signal(sig, lambda _sig, _frame: stop())
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
