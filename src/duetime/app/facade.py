"""The facade users touch: ``schedule``, ``cancel``, ``get``, ``emit``, handlers and the worker,
and the app's parts: ``app.timers``, ``app.schedules``, ``app.limits``, ``app.tokens``,
``app.audit``, ``app.namespaces``, ``app.events``, ``app.sql``, ``app.keys``.

Each part is a class of its own module here, made with the app's one :class:`AppContext` (store,
clock, settings, namespace, actor) and tested alone; :class:`AsyncApp` opens and closes, wires
handlers, routes and the worker, and hands the four verbs to their parts. The methods it had
before its parts existed still work and warn (:mod:`duetime.app.deprecation`).
:class:`duetime.app.sync.App` mirrors it for code that is not async. The CLI and the REST API
talk only to this facade."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import replace
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from duetime.app.audit import Audit
from duetime.app.context import AppContext
from duetime.app.deprecation import moved, relay
from duetime.app.events import Events
from duetime.app.keys import Keys
from duetime.app.limits import Limits
from duetime.app.namespaces import Namespaces
from duetime.app.namespaces import namespace_page as namespace_page
from duetime.app.routing import add_route
from duetime.app.schedules import Schedules
from duetime.app.sql_access import Sql
from duetime.app.timers import Timers
from duetime.app.tokens import Tokens
from duetime.app.working import build_worker
from duetime.bus.routes import Route
from duetime.clock import Clock
from duetime.config import DEFAULT_NAMESPACE, Settings
from duetime.destinations.base import Destination
from duetime.destinations.registry import Destinations
from duetime.dispatch import check_routes
from duetime.handlers import HandlerRegistry
from duetime.model import Node
from duetime.model.audit import Actor
from duetime.model.history import MaintenanceReport
from duetime.services.startup import until_available
from duetime.store import Store as Store
from duetime.store import create_store as create_store
from duetime.worker import Worker, WorkerObserver, WorkerStats

if TYPE_CHECKING:
    from duetime.observability.otel import Tracing

F = TypeVar("F", bound=Callable[..., Any])


class AsyncApp:
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
        """``producer``, ``create_namespace`` and ``actor``: see :class:`AppContext` (the CLI
        and the REST API pass ``create_namespace=False``, so a typo in a namespace is an
        ``unknown_namespace`` error and never timers no worker serves). ``tracer_provider``: an
        OpenTelemetry tracer provider of the app's own, used instead of the global one (and
        tracing on unless ``tracing="off"``)."""
        if settings is None:
            settings = Settings.from_env(
                database_url=database_url, namespace=namespace, **overrides
            )
        shared = store
        store = store or create_store(settings.database_url)
        sealing = settings.sealing()
        if sealing.enabled or shared is None:  # a shared store keeps the ring it was given
            store.sealing = sealing
        context = AppContext(
            store,
            clock,
            settings,
            settings.namespace,
            actor=actor,
            producer=producer,
            create_namespace=create_namespace,
            tracer_provider=tracer_provider,
            owns_store=shared is None,
        )
        self.context = context
        """What the parts share (store, clock, settings, namespace, actor), opened once."""
        self.registry = HandlerRegistry()
        self.observers: list[WorkerObserver] = []
        self.routes: list[Route] = []
        self.audit = Audit(context)
        self.timers = Timers(context, self.audit)
        self.events = Events(context, self.timers)
        self.schedules = Schedules(context, self.audit)
        self.limits = Limits(context, self.audit)
        self.tokens = Tokens(context, self.audit)
        self.namespaces = Namespaces(context, self.audit)
        self.sql = Sql(context, self.audit)
        self.keys = Keys(context)

    @property
    def store(self) -> Store:
        return self.context.store

    @property
    def namespace(self) -> str:
        return self.context.namespace

    @property
    def settings(self) -> Settings:
        return self.context.settings

    @settings.setter
    def settings(self, settings: Settings) -> None:
        self.context.settings = settings

    @property
    def clock(self) -> Clock:
        """The database's clock unless one is given (a test's): see docs/guarantees.md."""
        return self.context.clock

    @clock.setter
    def clock(self, clock: Clock) -> None:
        self.context.clock = clock

    @property
    def actor(self) -> Actor | None:
        """Who operator calls are made by when a call names no ``actor`` (None: not written)."""
        return self.context.actor

    @actor.setter
    def actor(self, actor: Actor | None) -> None:
        self.context.actor = actor

    @property
    def destinations(self) -> Destinations:
        """Destinations routes may name (see :meth:`route`, :meth:`add_destination`)."""
        return self.context.destinations

    @destinations.setter
    def destinations(self, destinations: Destinations) -> None:
        self.context.destinations = destinations

    @property
    def tracing(self) -> Tracing | None:
        """OpenTelemetry spans, once opened (``settings.tracing``); None: none, no context."""
        return self.context.tracing

    @property
    def producer(self) -> str | None:
        return self.context.producer

    def producer_id(self) -> str:
        """Who stores this app's timers: ``producer``, else ``<host>-<pid>``."""
        return self.context.producer_id()

    @property
    def is_open(self) -> bool:
        """Whether :meth:`open` has run (and :meth:`close` not since)."""
        return self.context.opened

    async def open(self, *, create_namespace: bool | None = None) -> AsyncApp:
        """Connect (and migrate) on first use; see :meth:`AppContext.open`."""
        await self.context.open(create_namespace=create_namespace)
        return self

    async def migrate(self) -> tuple[list[int], int]:
        """Apply pending migrations; return (versions applied now, schema version)."""
        await self.context.open_store(migrate=False)
        applied = await self.store.migrate()
        await self.store.ensure_namespace(DEFAULT_NAMESPACE, self.clock.now())
        return applied, await self.store.schema_version()

    async def nodes(self) -> list[Node]:
        """Every registered node of the database (nodes serve all namespaces)."""
        await self.context.open_store()
        return await self.store.list_nodes()

    async def close(self) -> None:
        await self.context.close()

    async def __aenter__(self) -> AsyncApp:
        return await self.open()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- the verbs every user types ---------------------------------------------------------
    schedule = relay(Timers.schedule, "timers")
    cancel = relay(Timers.cancel, "timers")
    get = relay(Timers.get, "timers")
    emit = relay(Events.emit, "events")

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

    def add_destination(self, destination: Destination) -> Destination:
        """Make ``destination`` (a webhook, a broker…) available to routes by its name."""
        self.destinations.add(destination)
        return destination

    def route(self, type: str, *, to: Destination | str | Sequence[Destination | str]) -> Route:
        """Send events whose type matches ``type`` (exact, or a glob such as ``order.*``) to
        each destination of ``to``: destinations, or names of ones added with
        :meth:`add_destination` (a destination given here is added). The worker of this app
        then claims those events (and their deliveries to these destinations); an event several
        destinations want, across every live node's handlers and routes, fans out into one
        delivery per destination, each retried and dead-lettered on its own. Names are checked
        when the worker is made: an unknown one is refused. An app has at most ``max_routes``
        routes (every node's subscriptions carry them)."""
        max_routes = self.settings.max_routes
        return add_route(self.routes, self.destinations, max_routes, self.namespace, type, to)

    def check_routes(self) -> None:
        """InvalidInput naming ``routes[i].to[j]`` when a route names no added destination."""
        check_routes(self.routes, {d.name: d for d in self.destinations})

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
        return build_worker(
            self.context,
            self.registry,
            self.observers,
            self.routes,
            self._app_on,
            types=types,
            node_id=node_id,
            materialize=materialize,
            maintain=maintain,
        )

    def _app_on(self, namespace: str) -> AsyncApp:
        """This app's store and clock on ``namespace`` (applies schedule changes from SQL)."""
        return AsyncApp(
            store=self.store,
            clock=self.clock,
            settings=replace(self.settings, namespace=namespace),
            create_namespace=False,
        )

    async def run_worker(self, **kwargs: Any) -> None:
        """Open (waiting while the database is unavailable at start), then run a worker."""
        await until_available(self.open, "opening the store", asyncio.Event())
        await self.worker(**kwargs).run()

    async def tick(self) -> WorkerStats:
        """Fire everything due now once and return what happened (cron / serverless entry)."""
        await self.open()
        return await self.worker().tick()

    async def maintain(self) -> MaintenanceReport:
        """The retention step once, now (workers run it every ``maintenance_interval``): move
        what finished ``archive_after`` ago to the history (PostgreSQL), delete what finished
        ``retention`` ago, and the audit log's entries as old, in every namespace."""
        await self.context.open_store()
        from duetime.services.retention import maintain, policy_of

        return await maintain(self.store, policy_of(self.settings), self.clock.now())

    # -- deprecated: the methods the parts took over ----------------------------------------
    schedule_many = moved(Timers.schedule_many, "timers")
    prepare = moved(Timers.prepare, "timers")
    put = moved(Timers.put, "timers")
    attempts = moved(Timers.attempts, "timers")
    moves = moved(Timers.moves, "timers")
    history = moved(Timers.history, "timers")
    dead = moved(Timers.dead, "timers")
    dead_types = moved(Timers.dead_types, "timers")
    counts = moved(Timers.counts, "timers")
    delete = moved(Timers.delete, "timers")
    replay = moved(Timers.replay, "timers")
    run_now = moved(Timers.run_now, "timers")
    bulk = moved(Timers.bulk, "timers")
    edit = moved(Timers.edit, "timers")
    types = moved(Events.types, "events")
    charts = moved(Events.charts, "events")
    activity = moved(Events.activity, "events")
    subscribers = moved(Events.subscribers, "events")
    unsubscribed = moved(Events.unsubscribed, "events")
    add_schedule = moved(Schedules.add, "schedules")
    add_schedules = moved(Schedules.add_many, "schedules")
    get_schedule = moved(Schedules.get, "schedules")
    list_schedules = moved(Schedules.list, "schedules")
    update_schedule = moved(Schedules.update, "schedules")
    pause_schedule = moved(Schedules.pause, "schedules")
    resume_schedule = moved(Schedules.resume, "schedules")
    delete_schedule = moved(Schedules.delete, "schedules")
    preview = moved(Schedules.preview, "schedules")
    tzdata_diff = moved(Schedules.tzdata_diff, "schedules")
    run_next_now = moved(Schedules.run_next_now, "schedules")
    materializer = moved(Schedules.materializer, "schedules")
    set_limit = moved(Limits.set, "limits")
    remove_limit = moved(Limits.remove, "limits")
    pause = moved(Limits.pause, "limits")
    resume = moved(Limits.resume, "limits")
    list_limits = moved(Limits.page, "limits")
    issue_token = moved(Tokens.issue, "tokens")
    list_tokens = moved(Tokens.list, "tokens")
    token_page = moved(Tokens.page, "tokens")
    revoke_token = moved(Tokens.revoke, "tokens")
    audit_log = moved(Audit.log, "audit")
    record_action = moved(Audit.record, "audit")
    audit_put = moved(Audit.record_put, "audit")
    add_namespace = moved(Namespaces.add, "namespaces")
    namespace_page = moved(Namespaces.page, "namespaces")
    grant_sql = moved(Sql.grant, "sql")
    revoke_sql = moved(Sql.revoke, "sql")
    sql_grants = moved(Sql.grants, "sql")
    rotate_keys = moved(Keys.rotate, "keys")
