"""The facade users touch: schedule, emit, cancel, get, history, handlers, and the worker.

:class:`AsyncApp` is the core (its schedule methods come from :mod:`duetime.app_schedules`);
:class:`duetime.sync.App` wraps it for code that is not async. The CLI and the REST API talk
only to this facade.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import date as date_type
from datetime import datetime, timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from duetime.app_acting import ActingMethods
from duetime.app_audit import AuditMethods
from duetime.app_limits import LimitMethods
from duetime.app_schedules import ScheduleMethods
from duetime.app_subscribers import SubscriberMethods
from duetime.app_tokens import TokenMethods
from duetime.clock import Clock, DatabaseClock
from duetime.config import DEFAULT_NAMESPACE, Settings
from duetime.destinations.base import Destination, check_name
from duetime.destinations.registry import Destinations
from duetime.dispatch import check_routes
from duetime.errors import CapReached, InvalidInput, NotFound, UnknownNamespace
from duetime.handlers import HandlerRegistry
from duetime.history import (
    ActivityMinute,
    LoggedEvent,
    MaintenanceReport,
    activity_series,
    activity_window,
    event_filter,
)
from duetime.model import (
    JSON,
    Attempt,
    BulkAction,
    DeadType,
    NewTimer,
    Node,
    OnConflict,
    Page,
    PutResult,
    Status,
    Timer,
    TimerFilter,
)
from duetime.model.audit import Actor, filter_target
from duetime.model.charts import ChartBucket, chart_series, chart_window
from duetime.model.finding import PayloadMatch
from duetime.model.moves import TimerMove
from duetime.outbox import held_async
from duetime.requests import TimerRequest
from duetime.routes import HANDLER, Route, check_pattern
from duetime.services.upkeep import worker_services
from duetime.store import Store as Store
from duetime.store import create_store as create_store
from duetime.store.cursors import decode_name_cursor, encode_name_cursor, page
from duetime.store.parts import OutboxStore, require
from duetime.timer_filters import check_action, check_sort, timer_filter
from duetime.tracing import tracing_for
from duetime.validation import (
    check_keys,
    check_limit,
    check_lookup_key,
    check_namespace,
    check_on_conflict,
    check_producer,
    type_name,
)
from duetime.worker import Worker, WorkerObserver, WorkerStats
from duetime.worker.destination_limits import keep_destination_limits

if TYPE_CHECKING:
    from duetime.otel import Tracing

F = TypeVar("F", bound=Callable[..., Any])


_END = object()
BULK_BATCH = 1000
"""Rows a bulk action changes per transaction."""
"""What ``next`` returns past the last request (a request list may hold anything)."""


class AsyncApp(
    ScheduleMethods, TokenMethods, LimitMethods, AuditMethods, SubscriberMethods, ActingMethods
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
            await self._sync_clock()
            create = self.create_namespace if create_namespace is None else create_namespace
            if create or self.namespace == DEFAULT_NAMESPACE:
                await self.store.ensure_namespace(self.namespace, self.clock.now())
            elif not await self.store.namespace_exists(self.namespace):
                raise UnknownNamespace(self.namespace)
            await keep_destination_limits(
                self.store, self.namespace, self.destinations, self.clock.now()
            )
        return self

    async def add_namespace(self, name: str) -> bool:
        """Create namespace ``name`` (True) unless it exists (False): ``duetime namespaces
        create`` and ``POST /v1/namespaces``; at most ``max_namespaces`` of them."""
        name = check_namespace(name)
        await self._open_store(migrate=self.settings.migrate)
        cap = self.settings.max_namespaces
        return bool(await self.store.add_namespaces([name], self.clock.now(), cap, "name"))

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
        after = decode_name_cursor(cursor)
        await self._open_store(migrate=self.settings.migrate)
        rows = await self.store.list_namespaces(after, limit + 1, only)
        return page(rows, limit, lambda name: name, encode_name_cursor)

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

    # -- routes -----------------------------------------------------------------------------
    def add_destination(self, destination: Destination) -> Destination:
        """Make ``destination`` (a webhook, a broker…) available to routes by its name."""
        self.destinations.add(destination)
        return destination

    def route(self, type: str, *, to: Destination | str | Sequence[Destination | str]) -> Route:
        """Send events whose type matches ``type`` (exact, or a glob such as ``order.*``) to
        each destination of ``to``: destinations, or names of ones added with
        :meth:`add_destination` (a destination given here is added).

        The worker of this app then claims those events (and their deliveries to these
        destinations); an event several destinations want, across every live node's handlers
        and routes, fans out into one delivery per destination, each retried and dead-lettered
        on its own. Names are checked when the worker is made: an unknown one is refused. An
        app has at most ``max_routes`` routes (every node's subscriptions carry them).
        """
        pattern = check_pattern(type)
        cap = self.settings.max_routes
        if len(self.routes) >= cap:
            where = f"the app of namespace {self.namespace!r}"
            raise CapReached("type", where, "routes", cap, "max_routes")
        items: list[object] = (
            list(to) if isinstance(to, Sequence) and not isinstance(to, str) else [to]
        )
        if not items:
            raise InvalidInput("to", "name at least one destination")
        names: dict[str, None] = {}
        adding: dict[str, Destination] = {}
        for index, item in enumerate(items):
            field = f"to[{index}]"
            if isinstance(item, str):
                name = check_name(item, field)
            elif isinstance(item, Destination):
                name = check_name(item.name, field)
                known = self.destinations.get(name) if name in self.destinations else None
                if (known or adding.setdefault(name, item)) is not item:
                    raise InvalidInput(field, f"another destination is already named {name!r}")
            else:
                raise InvalidInput(
                    field, f"expected a destination or its name, not {type_name(item)}"
                )
            if name == HANDLER:
                raise InvalidInput(
                    field,
                    f"{HANDLER!r} stands for Python handlers: register one with "
                    "@app.handler(type) instead of routing to it",
                )
            names[name] = None
        for destination in adding.values():  # only once the whole route is known to be good
            if destination.name not in self.destinations:
                self.destinations.add(destination)
        route = Route(pattern, tuple(names))
        self.routes.append(route)
        return route

    def check_routes(self) -> None:
        """InvalidInput naming ``routes[i].to[j]`` when a route names no added destination."""
        check_routes(self.routes, {d.name: d for d in self.destinations})

    def _tracing(self) -> Tracing | None:
        """:attr:`tracing` once opened; before, what opening will decide."""
        if self._opened:
            return self.tracing
        return tracing_for(self.settings.tracing, self.tracer_provider)

    def producer_id(self) -> str:
        """Who stores this app's timers: ``producer``, else ``<host>-<pid>``."""
        return self.producer or f"{socket.gethostname()}-{os.getpid()}"

    # -- scheduling -------------------------------------------------------------------------
    async def schedule(
        self,
        type: str,
        payload: JSON = None,
        *,
        at: str | datetime | None = None,
        delay: str | int | float | timedelta | None = None,
        local: str | datetime | None = None,
        date: str | date_type | None = None,
        timezone: str | None = None,
        disambiguation: str = "compatible",
        key: str | None = None,
        subject: str | None = None,
        correlation_id: str | None = None,
        max_attempts: int | None = None,
        expires_after: str | float | timedelta | None = None,
        priority: int | None = None,
        on_conflict: OnConflict = "update",
        transaction: object | None = None,
    ) -> PutResult:
        """Store one timer; the answer says whether it was created, updated or kept.

        ``transaction``: the caller's own transaction, to store the timer in (the outbox
        pattern): it is visible only once that transaction commits, and gone if it rolls back.
        AsyncApp takes a psycopg ``AsyncConnection``, a SQLAlchemy ``AsyncConnection`` or
        ``AsyncSession`` (psycopg driver), or a ``sqlite3.Connection`` on this app's SQLite
        file; :class:`duetime.App` the blocking kinds — a psycopg ``Connection``, a SQLAlchemy
        ``Connection`` or ``Session``, Django's ``connection`` inside ``transaction.atomic()``,
        a ``sqlite3.Connection``. One that has not begun its transaction yet is made to begin
        it; one in autocommit mode with none open is refused. See docs/transactions.md.
        """
        request = TimerRequest(
            type=type,
            payload=payload,
            at=at,
            delay=delay,
            local=local,
            date=date,
            timezone=timezone,
            disambiguation=disambiguation,
            key=key,
            subject=subject,
            correlation_id=correlation_id,
            max_attempts=max_attempts,
            expires_after=expires_after,
            priority=priority,
        )
        (result,) = await self.schedule_many(
            [request], on_conflict=on_conflict, transaction=transaction
        )
        return result

    async def schedule_many(
        self,
        requests: Iterable[TimerRequest],
        *,
        on_conflict: OnConflict = "update",
        transaction: object | None = None,
    ) -> list[PutResult]:
        """Store many timers in one transaction: all of them, or (on bad input) none.

        ``transaction``: the caller's own transaction, as for :meth:`schedule`.

        With tracing on, in one ``duetime schedule`` span (``duetime schedule {type}`` for a
        list of one request), whose context each timer stores.
        """
        tracing = self._tracing()
        if tracing is None:
            return await self._store_requests(requests, on_conflict, transaction)
        one = requests[0].type if isinstance(requests, Sequence) and len(requests) == 1 else None
        with tracing.scheduling(self.namespace, one) as span:
            results = await self._store_requests(requests, on_conflict, transaction)
            if one is not None:
                span.set_attribute("messaging.message.id", results[0].timer.key)
                span.set_attribute("duetime.action", results[0].action)
            else:
                span.set_attribute("messaging.batch.message_count", len(results))
        return results

    async def _store_requests(
        self, requests: Iterable[TimerRequest], on_conflict: OnConflict, transaction: object | None
    ) -> list[PutResult]:
        # Validated as the store reads them, each with its payload's JSON text (no caller
        # sees these timers before they are stored).
        timers: Iterable[NewTimer] = self._resolve(requests, straight_to_store=True)
        if not self._opened:  # opening creates the namespace: not for a batch that is refused
            timers = list(timers)
        return await self.put(timers, on_conflict=on_conflict, transaction=transaction)

    def prepare(self, requests: Iterable[TimerRequest]) -> list[NewTimer]:
        """Validate requests into storable timers (raises InvalidInput naming the field)."""
        return list(self._resolve(requests))

    def _resolve(
        self, requests: Iterable[TimerRequest], *, straight_to_store: bool = False
    ) -> Iterator[NewTimer]:
        """Each request validated as it is read, so a store can send the timers read so far
        while the rest are still being validated. A bad one raises InvalidInput naming its
        field, behind its index (``[3].timezone``) unless it is the only request. "Now" is
        read here, when the batch is given, not when the store gets to each request, and so
        is the trace context (tracing on, and a span current) each of them stores."""
        now = self.clock.now()
        namespace, producer, settings = self.namespace, self.producer_id(), self.settings
        tracing = self._tracing()
        trace_context = None if tracing is None else tracing.current_text()
        max_attempts, max_payload_bytes = settings.max_attempts, settings.max_payload_bytes

        def resolved() -> Iterator[NewTimer]:
            items = iter(requests)
            for index, request in enumerate(items):
                try:
                    yield request.resolve(
                        namespace,
                        now,
                        max_attempts,
                        max_payload_bytes,
                        producer=producer,
                        straight_to_store=straight_to_store,
                        trace_context=trace_context,
                    )
                except InvalidInput as exc:
                    if index == 0 and next(items, _END) is _END:
                        raise
                    raise InvalidInput(f"[{index}].{exc.field}", exc.message) from exc

        return resolved()

    async def put(
        self,
        timers: Iterable[NewTimer],
        *,
        on_conflict: OnConflict = "update",
        transaction: object | None = None,
    ) -> list[PutResult]:
        """Store validated timers (see :meth:`prepare`); ``transaction`` as for :meth:`schedule`."""
        check_on_conflict(on_conflict)
        await self.open()
        if transaction is not None:
            outbox = self._outbox("scheduling inside your own transaction")
            held = await held_async(transaction)
            return await outbox.put_timers_in(
                held.connection, timers, on_conflict, self.clock.now()
            )
        return await self.store.put_timers(timers, on_conflict, self.clock.now())

    def _outbox(self, doing: str) -> OutboxStore:
        return require(self.store.outbox, "outbox", self.store, field="transaction", doing=doing)

    async def emit(
        self,
        type: str,
        payload: JSON = None,
        *,
        key: str | None = None,
        subject: str | None = None,
        correlation_id: str | None = None,
        max_attempts: int | None = None,
        priority: int | None = None,
        transaction: object | None = None,
    ) -> PutResult:
        """Emit an event now: a timer due at once, delivered like any other.

        ``transaction``: the caller's own transaction, as for :meth:`schedule` — the event
        exists, and is delivered, only if that transaction commits (the transactional outbox).
        """
        return await self.schedule(
            type,
            payload,
            delay=0,
            key=key,
            subject=subject,
            correlation_id=correlation_id,
            max_attempts=max_attempts,
            priority=priority,
            on_conflict="keep",
            transaction=transaction,
        )

    # -- reading and changing ---------------------------------------------------------------
    async def get(self, key: str) -> Timer:
        await self.open()
        timer = await self.store.get_timer(self.namespace, check_lookup_key(key))
        if timer is None:
            raise NotFound(
                f"no timer with key {key!r} in namespace {self.namespace!r}", field="key"
            )
        return timer

    async def attempts(self, key: str) -> list[Attempt]:
        timer = await self.get(key)
        return await self.store.list_attempts(timer.id)

    async def moves(self, key: str) -> list[TimerMove]:
        """The timer's moves by new zone rules (its wall time kept), oldest first."""
        timer = await self.get(key)
        return await self.schedules.list_timer_moves(timer.id)

    async def cancel(
        self, key: str, *, transaction: object | None = None, actor: Actor | None = None
    ) -> Timer:
        """Cancel while scheduled or waiting for a retry; Conflict once it has fired.

        ``transaction``: the caller's own transaction, as for :meth:`schedule` — the timer is
        cancelled only if that transaction commits, and stays as it was if it rolls back (the
        application's own work: not written to the audit log). ``actor``: who cancels it, for
        the audit log (see :mod:`duetime.app_audit`).
        """
        key = check_lookup_key(key)
        await self.open()
        if transaction is not None:
            outbox = self._outbox("cancelling inside your own transaction")
            held = await held_async(transaction)
            return await outbox.cancel_in(held.connection, self.namespace, key, self.clock.now())
        timer = await self.store.cancel(self.namespace, key, self.clock.now())
        await self._audit(actor, "cancel", {"key": key})
        return timer

    async def delete(self, key: str, *, actor: Actor | None = None) -> Timer:
        """Delete a finished timer (done, dead, cancelled or expired) with its attempts and,
        on PostgreSQL, its archived history; returns it as it was. Conflict for a pending one
        (cancel it first) or a running one; its key is free to schedule again afterwards."""
        key = check_lookup_key(key)
        await self.open()
        timer = await self.store.delete(self.namespace, key, self.clock.now())
        await self._audit(actor, "delete", {"key": key})
        return timer

    async def history(
        self,
        subject: str | None = None,
        *,
        status: Status | str | None = None,
        type: str | None = None,
        due_from: str | datetime | timedelta | None = None,
        due_until: str | datetime | timedelta | None = None,
        payload: str | PayloadMatch | None = None,
        sort: str | None = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> Page[Timer]:
        """Timers newest first, optionally of one subject / status / type (or ``order.*``
        glob) / due range ``[due_from, due_until)`` / payload field (``customer.id=42``);
        ``sort``: ``due`` (earliest first), ``updated`` (latest first), ``attempts`` (most
        first) instead; paginated by cursor."""
        await self.open()
        found = timer_filter(
            subject=subject,
            status=status,
            type=type,
            due_from=due_from,
            due_until=due_until,
            payload=payload,
            now=self.clock.now(),
        )
        order = check_sort(sort or "newest")
        check_limit(limit)
        return await self.store.list_timers(self.namespace, found, cursor, limit, order)

    async def types(self, prefix: str = "", limit: int = 20) -> list[str]:
        """Known event types starting with ``prefix`` (the namespace's schedules' and its
        newest timers'), alphabetically: suggestions while one types."""
        await self.open()
        if not isinstance(prefix, str) or len(prefix) > 200:
            raise InvalidInput("prefix", "must be text of at most 200 characters")
        check_limit(limit)
        return await self.store.list_types(self.namespace, prefix, limit)

    async def dead(self, *, cursor: str | None = None, limit: int = 50) -> Page[Timer]:
        """The dead-letter queue: timers that ran out of attempts or were declared dead."""
        return await self.history(status=Status.DEAD, cursor=cursor, limit=limit)

    async def dead_types(self, limit: int = 20) -> list[DeadType]:
        """The dead-letter queue by event type, most first: what broke, and how much of it."""
        await self.open()
        check_limit(limit)
        return await self.store.dead_types(self.namespace, limit)

    async def replay(self, key: str, *, actor: Actor | None = None) -> Timer:
        """Send a dead timer round again, due now, with a fresh set of attempts."""
        await self.open()
        key = check_lookup_key(key)
        timer = await self.store.replay(self.namespace, key, self.clock.now())
        await self._audit(actor, "replay", {"key": key})
        return timer

    async def run_now(self, key: str, *, actor: Actor | None = None) -> Timer:
        """Make a scheduled or retrying timer due now (retry now, or run early)."""
        await self.open()
        key = check_lookup_key(key)
        timer = await self.store.run_now(self.namespace, key, self.clock.now())
        await self._audit(actor, "run_now", {"key": key})
        return timer

    async def bulk(
        self,
        action: BulkAction | str,
        filter: TimerFilter,
        *,
        keys: Sequence[str] | None = None,
        batch: int = BULK_BATCH,
        dry_run: bool = False,
        actor: Actor | None = None,
    ) -> int:
        """Cancel, replay, run now or delete every timer ``filter`` takes (see
        :func:`timer_filter`) — of ``keys`` only, when given (a selection, up to
        :data:`~duetime.model.MAX_BULK_KEYS`) — that the action applies to; returns how many
        changed (with ``dry_run``, how many match). Runs in batches of ``batch`` rows, each its
        own transaction, walking ids upwards: a timer that dies again meanwhile is not replayed
        twice in one run. The audit log gets one entry, with the count, once the last batch is
        done (or once one fails: with the count reached, marked ``interrupted``)."""
        await self.open()
        checked = check_action(action)
        chosen = None if keys is None else check_keys(keys)
        if dry_run:
            return await self.store.count_matching(
                self.namespace, checked, filter, self.clock.now(), chosen
            )
        check_limit(batch, "batch", maximum=10_000)
        changed, after, finished = 0, 0, False
        try:
            while True:
                now = self.clock.now()
                step, last = await self.store.bulk_batch(
                    self.namespace, checked, filter, after, now, batch, chosen
                )
                changed += step
                if last is None:
                    finished = True
                    return changed
                after = last
        finally:
            target = filter_target(filter, chosen)
            if not finished:
                target["interrupted"] = True
            if finished or changed:
                await self._audit(actor, f"bulk_{checked}", target, changed)

    async def counts(self) -> dict[Status, int]:
        """Timers by status in the hot table (on PostgreSQL, archived ones are not counted)."""
        await self.open()
        return await self.store.count_by_status(self.namespace)

    # -- history ----------------------------------------------------------------------------
    async def events(
        self,
        *,
        type: str | None = None,
        since: str | datetime | timedelta | None = None,
        until: str | datetime | timedelta | None = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> Page[LoggedEvent]:
        """The event log: timers that fired, newest first, each with its deliveries (attempts).

        ``type`` is an exact type or a glob (``order.*``); ``since`` (inclusive) and ``until``
        bound when they fired: ISO 8601 instants, or durations meaning that long ago (``PT1H``).
        Archived timers are included; pruned ones (past ``retention``) are gone.
        """
        check_limit(limit)
        log_filter = event_filter(type, since, until, self.clock.now())
        await self.open()
        return await self.store.history.list_events(self.namespace, log_filter, cursor, limit)

    async def charts(
        self, range: str = "1h", *, type: str | None = None, node: str | None = None
    ) -> list[ChartBucket]:
        """Throughput and lateness (p50/p95/p99/max) over ``range`` (``1h``, ``24h``, ``7d``)
        in buckets, from the database: timers whose first attempt started in each, only of
        ``type`` (or glob) and first run on ``node`` when given."""
        await self.open()
        since, until, bucket = chart_window(self.clock.now(), range)
        if type is not None:
            check_pattern(type, "type")
        if node is not None and not (isinstance(node, str) and 0 < len(node) <= 200):
            raise InvalidInput("node", "must be a node id (text of at most 200 characters)")
        counts, lateness = await self.store.history.chart(
            self.namespace, since, until, bucket, type, node
        )
        return chart_series(since, until, bucket, counts, lateness)

    async def activity(self, minutes: int = 60) -> list[ActivityMinute]:
        """Throughput and lateness of the last ``minutes`` minutes, read from the database (so
        every node's work counts): per minute, the timers that fired, by status now, and how
        late they started (mean and max of ``fired_at - due_at``)."""
        since, until = activity_window(self.clock.now(), minutes)
        await self.open()
        counts = await self.store.history.activity(self.namespace, since, until)
        return activity_series(counts, since, minutes)

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
        return worker

    async def run_worker(self, **kwargs: Any) -> None:
        await self.open()
        await self.worker(**kwargs).run()

    async def tick(self) -> WorkerStats:
        """Fire everything due now once and return what happened (cron / serverless entry)."""
        await self.open()
        return await self.worker().tick()
