"""The facade users touch: schedule, emit, cancel, get, history, handlers, and the worker.

:class:`AsyncApp` is the core, one mixin per concern, each a module of this package: scheduling,
reading, acting, routing, schedules, tokens, limits, subscribers; what stays here is opening and
closing, handlers and the worker. :class:`duetime.app.sync.App` wraps it for code that is not async.
The CLI and the REST API talk only to this facade."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import replace
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from duetime.app.acting import ActingMethods
from duetime.app.limits import LimitMethods
from duetime.app.reading import ReadingMethods
from duetime.app.routing import RouteMethods
from duetime.app.schedules import ScheduleMethods
from duetime.app.scheduling import SchedulingMethods
from duetime.app.sql_access import SqlAccessMethods
from duetime.app.sql_schedules import ScheduleChanges
from duetime.app.subscribers import SubscriberMethods
from duetime.app.tokens import TokenMethods
from duetime.bus.routes import Route
from duetime.clock import Clock, DatabaseClock
from duetime.config import DEFAULT_NAMESPACE, Settings
from duetime.destinations.registry import Destinations
from duetime.errors import UnknownNamespace
from duetime.handlers import HandlerRegistry
from duetime.model import Node, Page
from duetime.model.audit import Actor
from duetime.model.history import MaintenanceReport
from duetime.observability.tracing import tracing_for
from duetime.services.startup import until_available
from duetime.services.upkeep import worker_services
from duetime.store import Store as Store
from duetime.store import create_store as create_store
from duetime.store.cursors import decode_name_cursor, encode_name_cursor, page
from duetime.validation import check_limit, check_namespace, check_producer
from duetime.worker import Worker, WorkerObserver, WorkerStats
from duetime.worker.destination_limits import keep_destination_limits

if TYPE_CHECKING:
    from duetime.observability.otel import Tracing

F = TypeVar("F", bound=Callable[..., Any])


async def namespace_page(
    store: Store, cursor: str | None, limit: int, only: Sequence[str] | None
) -> Page[str]:
    """A page of the store's namespaces by name (see :meth:`AsyncApp.namespace_page`), read
    from a store that is open already: the REST API answers 503 until its lifespan opened it."""
    check_limit(limit)
    after = decode_name_cursor(cursor)
    rows = await store.list_namespaces(after, limit + 1, only)
    return page(rows, limit, lambda name: name, encode_name_cursor)


class AsyncApp(
    SchedulingMethods,
    ReadingMethods,
    ActingMethods,
    RouteMethods,
    ScheduleMethods,
    TokenMethods,
    LimitMethods,
    SubscriberMethods,
    SqlAccessMethods,
):
    """duetime on one database and one namespace, for asyncio code."""

    def __init__(
        self,
        database_url: str | None = None,
        namespace: str | None = None,
        *,
        clock: Clock | None = None,
        settings: Settings | None = None,
        store: Store | None = None,
        producer: str | None = None,
        create_namespace: bool = True,
        tracer_provider: object = None,
        actor: Actor | None = None,
        **overrides: Any,
    ) -> None:
        """``producer`` names who stores this app's timers and events (the envelope's
        ``producer``); by default ``<host>-<pid>``, which this process's node ids start with.
        ``create_namespace`` is whether opening creates the app's namespace (an app opens its
        own); the CLI and the REST API pass False, so a typo in a namespace is an
        ``unknown_namespace`` error and never timers no worker serves. ``tracer_provider``: an
        OpenTelemetry tracer provider of the app's own, used instead of the global one (and
        tracing on unless ``tracing="off"``). ``actor``: who this app's operator calls (cancel,
        replay, delete, bulk, pause…) are made by, written to the audit log with each; None
        (the default) writes them only when a call names its own ``actor``."""
        if settings is None:
            settings = Settings.from_env(
                database_url=database_url, namespace=namespace, **overrides
            )
        self.settings = settings
        self.namespace = check_namespace(settings.namespace)
        self.store: Store = store or create_store(settings.database_url)
        sealing = settings.sealing()
        if sealing.enabled or store is None:  # a shared store keeps the ring it was given
            self.store.sealing = sealing
        self.clock: Clock = clock or DatabaseClock(self.store.db_now)
        """The database's clock unless one is given (a test's): see docs/guarantees.md."""
        # A store passed in is shared (e.g. by the API's facades): not ours to close.
        self._owns_store = store is None
        self.registry = HandlerRegistry()
        self.observers: list[WorkerObserver] = []
        self.destinations = Destinations()
        """Destinations routes may name (see :meth:`route`, :meth:`add_destination`)."""
        self.routes: list[Route] = []
        self.producer = None if producer is None else check_producer(producer)
        self.create_namespace = create_namespace
        self.tracer_provider = tracer_provider
        self.actor = actor
        self.tracing: Tracing | None = None
        """OpenTelemetry spans, once :meth:`open` has decided (``settings.tracing``); None:
        this app traces nothing and stores no trace context."""
        self._opened = False

    # -- lifecycle --------------------------------------------------------------------------
    @property
    def is_open(self) -> bool:
        """Whether :meth:`open` has run (and :meth:`close` not since)."""
        return self._opened

    async def open(self, *, create_namespace: bool | None = None) -> AsyncApp:
        """Connect (and migrate) on first use. The namespace is created when
        ``create_namespace`` (else the app's own policy) says so, and ``default`` always, so a
        fresh database works with no set-up; any other unknown one is
        :class:`~duetime.errors.UnknownNamespace`."""
        if not self._opened:
            self.tracing = self._tracing()
            await self.store.open(migrate=self.settings.migrate)
            self._opened = True
            try:
                await self._sync_clock()
                create = self.create_namespace if create_namespace is None else create_namespace
                if create or self.namespace == DEFAULT_NAMESPACE:
                    await self.store.ensure_namespace(self.namespace, self.clock.now())
                elif not await self.store.namespace_exists(self.namespace):
                    raise UnknownNamespace(self.namespace)
                await keep_destination_limits(
                    self.store, self.namespace, self.destinations, self.clock.now()
                )
            except BaseException:
                await self.close()  # all or nothing: opening again starts afresh
                raise
        return self

    async def add_namespace(self, name: str, *, actor: Actor | None = None) -> bool:
        """Create namespace ``name`` (True) unless it exists (False): ``duetime namespaces
        create`` and ``POST /v1/namespaces``; at most ``max_namespaces`` of them. A new one's
        audit log starts with who created it."""
        name = check_namespace(name)
        await self._open_store(migrate=self.settings.migrate)
        cap = self.settings.max_namespaces
        created = bool(await self.store.add_namespaces([name], self.clock.now(), cap, "name"))
        if created:
            await self._audit(actor, "namespace_create", {"namespace": name}, namespaces=[name])
        return created

    async def namespaces(self) -> list[str]:
        """Every namespace of the database, by name (at most ``max_namespaces`` made through
        the capped ways); :meth:`namespace_page` pages them."""
        await self._open_store(migrate=self.settings.migrate)
        return await self.store.list_namespaces()

    async def namespace_page(
        self,
        *,
        cursor: str | None = None,
        limit: int = 100,
        only: Sequence[str] | None = None,
    ) -> Page[str]:
        """One page of :meth:`namespaces`, by name; pass ``next_cursor`` back for the next.
        ``only``: those of these names (a token's scope), so a page never skips past names the
        caller may not see."""
        check_limit(limit)
        await self._open_store(migrate=self.settings.migrate)
        return await namespace_page(self.store, cursor, limit, only)

    async def _open_store(self, *, migrate: bool) -> None:
        """Open the store without creating this app's namespace (admin commands)."""
        if not self._opened:
            await self.store.open(migrate=migrate)
            self._opened = True
            await self._sync_clock()

    async def _sync_clock(self) -> None:
        """Read the database's clock once, so "now" (a ``delay``, what is due) is its time
        from the first request on; a worker's clock service keeps it fresh."""
        if isinstance(self.clock, DatabaseClock) and self.clock.last is None:
            await self.clock.sync()

    async def migrate(self) -> tuple[list[int], int]:
        """Apply pending migrations; return (versions applied now, schema version)."""
        await self._open_store(migrate=False)
        applied = await self.store.migrate()
        await self.store.ensure_namespace(DEFAULT_NAMESPACE, self.clock.now())
        return applied, await self.store.schema_version()

    async def nodes(self) -> list[Node]:
        """Every registered node of the database (nodes serve all namespaces)."""
        await self._open_store(migrate=self.settings.migrate)
        return await self.store.list_nodes()

    async def close(self) -> None:
        await self.destinations.close()  # they reconnect if used again
        if self._opened:
            if self._owns_store:
                await self.store.close()
            self._opened = False

    async def __aenter__(self) -> AsyncApp:
        return await self.open()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- handlers ---------------------------------------------------------------------------
    def handler(self, type: str, *, transactional: bool = False) -> Callable[[F], F]:
        """Register the decorated function (sync or async) for events of ``type``.

        ``transactional=True``: the function is called as ``func(event, connection)`` inside the
        transaction that marks the timer done — its writes and the completion commit together.
        PostgreSQL passes a psycopg ``AsyncConnection`` (the function may be async); SQLite a
        ``sqlite3.Connection`` (the function must be a plain ``def``; keep it short, it holds
        the database's write lock). For a SQLAlchemy session in that transaction, see
        :mod:`duetime.contrib.sqlalchemy`.
        """

        def register(func: F) -> F:
            self.registry.register(type, func, transactional=transactional)
            return func

        return register

    def _tracing(self) -> Tracing | None:
        """:attr:`tracing` once opened; before, what opening will decide."""
        if self._opened:
            return self.tracing
        return tracing_for(self.settings.tracing, self.tracer_provider)

    def producer_id(self) -> str:
        """Who stores this app's timers: ``producer``, else ``<host>-<pid>``."""
        return self.producer or f"{socket.gethostname()}-{os.getpid()}"

    async def maintain(self) -> MaintenanceReport:
        """The retention step once, now (workers run it every ``maintenance_interval``): move
        what finished ``archive_after`` ago to the history (PostgreSQL), delete what finished
        ``retention`` ago, and the audit log's entries as old, in every namespace."""
        await self._open_store(migrate=self.settings.migrate)
        from duetime.services.retention import maintain, policy_of

        return await maintain(self.store, policy_of(self.settings), self.clock.now())

    # -- working ----------------------------------------------------------------------------
    def worker(
        self,
        *,
        types: Sequence[str] | None = None,
        node_id: str | None = None,
        materialize: bool = True,
        maintain: bool = True,
    ) -> Worker:
        """A worker for this app's namespace, handlers and routes (``run()`` or ``tick()``),
        with its node's services: rescue, heartbeat, sweep, and unless turned off the
        schedules' materializer and the retention step.

        InvalidInput naming ``routes[i].to[j]`` when a route names an unknown destination.
        """
        worker = Worker(
            self.store,
            self.registry,
            self.settings,
            self.clock,
            namespace=self.namespace,
            types=types,
            node_id=node_id,
            observers=self.observers,
            routes=self.routes,
            destinations={d.name: d for d in self.destinations},
            tracing=self._tracing(),
        )
        worker.add_services(
            worker_services(
                self.store,
                self.clock,
                self.settings,
                node_id=worker.node_id,
                namespace=worker.namespace,
                dispatch=worker.dispatch,
                holder=worker,
                materialize=materialize,
                maintain=maintain,
            )
        )
        if materialize and self.store.sql_access is not None:
            changes = ScheduleChanges(self.store, self.store.sql_access, self.clock, self._app_on)
            worker.add_services([changes])
        return worker

    def _app_on(self, namespace: str) -> AsyncApp:
        """An app on ``namespace`` sharing this one's store and clock (schedule changes made
        from SQL are applied through one; it never creates its namespace)."""
        return AsyncApp(
            store=self.store,
            clock=self.clock,
            settings=replace(self.settings, namespace=namespace),
            create_namespace=False,
        )

    async def run_worker(self, **kwargs: Any) -> None:
        """Open, then run a worker until it is stopped; while the database is unavailable at
        start, wait for it (cancel to give up)."""
        await until_available(self.open, "opening the store", asyncio.Event())
        await self.worker(**kwargs).run()

    async def tick(self) -> WorkerStats:
        """Fire everything due now once and return what happened (cron / serverless entry)."""
        await self.open()
        return await self.worker().tick()
