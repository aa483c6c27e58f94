"""The facade users touch: schedule, emit, cancel, get, history, handlers, and the worker.

:class:`AsyncApp` is the core; :class:`duetime.sync.App` wraps it for code that is not async.
The CLI and the REST API talk only to this facade.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import date as date_type
from datetime import datetime, timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from duetime.clock import Clock, SystemClock
from duetime.config import Settings
from duetime.destinations.base import Destination, check_name
from duetime.destinations.registry import Destinations
from duetime.dispatch import check_routes
from duetime.errors import Conflict, InvalidInput, NotFound
from duetime.handlers import HandlerRegistry
from duetime.history import LoggedEvent, MaintenanceReport, event_filter
from duetime.model import (
    JSON,
    Attempt,
    NewTimer,
    Node,
    OnConflict,
    Page,
    PutResult,
    Schedule,
    Status,
    Timer,
    TimerFilter,
)
from duetime.requests import TimerRequest
from duetime.routes import HANDLER, Route, check_pattern
from duetime.schedules import (
    UNSET,
    RuleCache,
    ScheduleAction,
    ScheduleFilter,
    ScheduleRequest,
    Unset,
    check_schedule_name,
    preview_occurrences,
    revise,
)
from duetime.store import Store, create_store
from duetime.store.protocol import (
    SchedulingStore,
    TransactionalStore,
    history_store,
    scheduling_store,
)
from duetime.validation import (
    check_limit,
    check_lookup_key,
    check_namespace,
    check_producer,
    check_type,
    type_name,
)
from duetime.worker import Worker, WorkerObserver, WorkerStats

if TYPE_CHECKING:
    from duetime.services.materializer import Materializer

F = TypeVar("F", bound=Callable[..., Any])
_ON_CONFLICT = ("update", "keep", "error")
_REVISE_TRIES = 20


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
        **overrides: Any,
    ) -> None:
        """``producer`` names who stores this app's timers and events (the envelope's
        ``producer``); by default ``<host>-<pid>``, which this process's node ids start with."""
        if settings is None:
            settings = Settings.from_env(
                database_url=database_url, namespace=namespace, **overrides
            )
        self.settings = settings
        self.namespace = check_namespace(settings.namespace)
        self.clock: Clock = clock or SystemClock()
        self.store: Store = store or create_store(settings.database_url)
        # A store passed in is shared (e.g. by the API's facades): not ours to close.
        self._owns_store = store is None
        self.registry = HandlerRegistry()
        self.observers: list[WorkerObserver] = []
        self.destinations = Destinations()
        """Destinations routes may name (see :meth:`route`, :meth:`add_destination`)."""
        self.routes: list[Route] = []
        self.producer = None if producer is None else check_producer(producer)
        self._opened = False

    # -- lifecycle --------------------------------------------------------------------------
    async def open(self, *, create_namespace: bool = True) -> AsyncApp:
        if not self._opened:
            await self.store.open(migrate=self.settings.migrate)
            self._opened = True
            if create_namespace:
                await self.store.ensure_namespace(self.namespace, self.clock.now())
            elif not await self.store.namespace_exists(self.namespace):
                raise NotFound(f"unknown namespace {self.namespace!r}", field="namespace")
        return self

    async def _open_store(self, *, migrate: bool) -> None:
        """Open the store without creating this app's namespace (admin commands)."""
        if not self._opened:
            await self.store.open(migrate=migrate)
            self._opened = True

    async def migrate(self) -> tuple[list[int], int]:
        """Apply pending migrations; return (versions applied now, schema version)."""
        await self._open_store(migrate=False)
        applied = await self.store.migrate()
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
        the database's write lock).
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
        on its own. Names are checked when the worker is made: an unknown one is refused.
        """
        pattern = check_pattern(type)
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
        on_conflict: OnConflict = "update",
        transaction: object | None = None,
    ) -> PutResult:
        """Store one timer; the answer says whether it was created, updated or kept.

        ``transaction``: a psycopg ``AsyncConnection`` with an open transaction — the timer is
        stored in it and exists only if the caller commits (PostgreSQL; the outbox pattern).
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
        """Store many timers in one transaction: all of them, or (on bad input) none."""
        timers = self.prepare(requests)
        return await self.put(timers, on_conflict=on_conflict, transaction=transaction)

    def prepare(self, requests: Iterable[TimerRequest]) -> list[NewTimer]:
        """Validate requests into storable timers (raises InvalidInput naming the field)."""
        now = self.clock.now()
        producer = self.producer_id()
        timers = []
        for index, request in enumerate(requests):
            try:
                timers.append(
                    request.resolve(
                        self.namespace,
                        now,
                        self.settings.max_attempts,
                        self.settings.max_payload_bytes,
                        producer=producer,
                    )
                )
            except InvalidInput as exc:
                if index == 0 and not timers:
                    raise
                raise InvalidInput(f"[{index}].{exc.field}", exc.message) from exc
        return timers

    async def put(
        self,
        timers: Sequence[NewTimer],
        *,
        on_conflict: OnConflict = "update",
        transaction: object | None = None,
    ) -> list[PutResult]:
        if on_conflict not in _ON_CONFLICT:
            raise InvalidInput("on_conflict", f"must be one of {', '.join(_ON_CONFLICT)}")
        await self.open()
        if transaction is not None:
            if not isinstance(self.store, TransactionalStore):
                raise InvalidInput(
                    "transaction", "scheduling inside a transaction needs the PostgreSQL store"
                )
            return await self.store.put_timers_in(
                transaction, timers, on_conflict, self.clock.now()
            )
        return await self.store.put_timers(timers, on_conflict, self.clock.now())

    async def emit(
        self,
        type: str,
        payload: JSON = None,
        *,
        key: str | None = None,
        subject: str | None = None,
        correlation_id: str | None = None,
        max_attempts: int | None = None,
        transaction: object | None = None,
    ) -> PutResult:
        """Emit an event now: a timer due at once, delivered like any other.

        ``transaction``: as for :meth:`schedule` — the event exists, and is delivered, only if
        the caller's transaction commits (the transactional outbox).
        """
        return await self.schedule(
            type,
            payload,
            delay=0,
            key=key,
            subject=subject,
            correlation_id=correlation_id,
            max_attempts=max_attempts,
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

    async def cancel(self, key: str) -> Timer:
        """Cancel while scheduled or waiting for a retry; Conflict once it has fired."""
        await self.open()
        return await self.store.cancel(self.namespace, check_lookup_key(key), self.clock.now())

    async def history(
        self,
        subject: str | None = None,
        *,
        status: Status | str | None = None,
        type: str | None = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> Page[Timer]:
        """Timers newest first, optionally of one subject / status / type; paginated."""
        await self.open()
        if status is not None:
            try:
                status = Status(status)
            except ValueError:
                raise InvalidInput(
                    "status", f"must be one of {', '.join(s.value for s in Status)}"
                ) from None
        if type is not None:
            check_type(type)
        check_limit(limit)
        timer_filter = TimerFilter(subject=subject, status=status, type=type)
        return await self.store.list_timers(self.namespace, timer_filter, cursor, limit)

    async def dead(self, *, cursor: str | None = None, limit: int = 50) -> Page[Timer]:
        """The dead-letter queue: timers that ran out of attempts or were declared dead."""
        return await self.history(status=Status.DEAD, cursor=cursor, limit=limit)

    async def replay(self, key: str) -> Timer:
        """Send a dead timer round again, due now, with a fresh set of attempts."""
        await self.open()
        return await self.store.replay(self.namespace, check_lookup_key(key), self.clock.now())

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
        return await history_store(self.store).list_events(
            self.namespace, log_filter, cursor, limit
        )

    async def maintain(self) -> MaintenanceReport:
        """The retention step once, now (workers run it every ``maintenance_interval``): move
        what finished ``archive_after`` ago to the history (PostgreSQL), delete what finished
        ``retention`` ago, in every namespace."""
        await self._open_store(migrate=self.settings.migrate)
        from duetime.services.retention import policy_of

        return await history_store(self.store).maintain(policy_of(self.settings), self.clock.now())

    # -- working ----------------------------------------------------------------------------
    def worker(self, *, types: Sequence[str] | None = None, node_id: str | None = None) -> Worker:
        """A worker for this app's namespace, handlers and routes (``run()`` or ``tick()``).

        InvalidInput naming ``routes[i].to[j]`` when a route names an unknown destination.
        """
        return Worker(
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
        )

    async def run_worker(self, **kwargs: Any) -> None:
        await self.open()
        await self.worker(**kwargs).run()

    async def tick(self) -> WorkerStats:
        """Fire everything due now once and return what happened (cron / serverless entry)."""
        await self.open()
        return await self.worker().tick()

    # -- schedules --------------------------------------------------------------------------
    @property
    def schedules(self) -> SchedulingStore:
        """The store, as the keeper of schedules."""
        return scheduling_store(self.store)

    async def add_schedule(
        self,
        name: str,
        type: str,
        payload: JSON = None,
        *,
        cron: str | None = None,
        every: str | int | float | timedelta | None = None,
        timezone: str = "UTC",
        subject: str | None = None,
        start_at: str | datetime | None = None,
        end_at: str | datetime | None = None,
        catch_up: str = "latest",
        on_gap: str = "run_after",
        on_overlap: str = "once",
        active: bool | None = None,
        max_attempts: int | None = None,
        on_conflict: OnConflict = "update",
    ) -> tuple[ScheduleAction, Schedule]:
        """Create the schedule ``name``, or bring an existing one to this definition.

        ``active=None`` creates it active and leaves an existing one paused or running as it
        is. The answer says ``created``, ``updated`` or ``kept`` (``on_conflict='keep'``, or
        the stored schedule already had this definition).
        """
        request = ScheduleRequest(
            name=name,
            type=type,
            payload=payload,
            cron=cron,
            every=every,
            timezone=timezone,
            subject=subject,
            start_at=start_at,
            end_at=end_at,
            catch_up=catch_up,
            on_gap=on_gap,
            on_overlap=on_overlap,
            active=True if active is None else active,
            max_attempts=max_attempts,
        )
        (result,) = await self.add_schedules(
            [request], on_conflict=on_conflict, keep_active=active is None
        )
        return result

    async def add_schedules(
        self,
        requests: Iterable[ScheduleRequest],
        *,
        on_conflict: OnConflict = "update",
        keep_active: bool = False,
    ) -> list[tuple[ScheduleAction, Schedule]]:
        """Create many schedules in one transaction (all validated first); see add_schedule."""
        if on_conflict not in _ON_CONFLICT:
            raise InvalidInput("on_conflict", f"must be one of {', '.join(_ON_CONFLICT)}")
        requests = list(requests)
        now = self.clock.now()
        news = []
        rules: RuleCache = {}
        for index, request in enumerate(requests):
            try:
                news.append(
                    request.resolve(
                        self.namespace,
                        now,
                        self.settings.max_attempts,
                        self.settings.max_payload_bytes,
                        rules=rules,
                    )
                )
            except InvalidInput as exc:
                if len(requests) == 1:
                    raise
                raise InvalidInput(f"[{index}].{exc.field}", exc.message) from exc
        await self.open()
        stored = await self.schedules.put_schedules(news, on_conflict, now)
        results: list[tuple[ScheduleAction, Schedule]] = []
        for request, row in zip(requests, stored, strict=True):
            if row is not None:
                results.append(("created", row))
                continue
            if on_conflict == "keep":
                results.append(("kept", await self.get_schedule(request.name)))
                continue

            def define(current: Schedule, request: ScheduleRequest = request) -> ScheduleRequest:
                return replace(request, active=current.active) if keep_active else request

            changed, schedule = await self._revise(request.name, define)
            results.append(("updated" if changed else "kept", schedule))
        return results

    async def get_schedule(self, name: str) -> Schedule:
        await self.open()
        schedule = await self.schedules.get_schedule(self.namespace, check_schedule_name(name))
        if schedule is None:
            raise NotFound(
                f"no schedule named {name!r} in namespace {self.namespace!r}", field="name"
            )
        return schedule

    async def list_schedules(
        self,
        *,
        subject: str | None = None,
        type: str | None = None,
        active: bool | None = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> Page[Schedule]:
        """Schedules by name, optionally of one subject / type / state; paginated."""
        await self.open()
        if type is not None:
            check_type(type)
        check_limit(limit)
        schedule_filter = ScheduleFilter(subject=subject, type=type, active=active)
        return await self.schedules.list_schedules(self.namespace, schedule_filter, cursor, limit)

    async def update_schedule(
        self,
        name: str,
        *,
        type: str | Unset = UNSET,
        payload: JSON | Unset = UNSET,
        cron: str | Unset | None = UNSET,
        every: str | int | float | timedelta | Unset | None = UNSET,
        timezone: str | Unset = UNSET,
        subject: str | Unset | None = UNSET,
        start_at: str | datetime | Unset | None = UNSET,
        end_at: str | datetime | Unset | None = UNSET,
        catch_up: str | Unset = UNSET,
        on_gap: str | Unset = UNSET,
        on_overlap: str | Unset = UNSET,
        max_attempts: int | Unset = UNSET,
        active: bool | Unset = UNSET,
    ) -> Schedule:
        """Change some fields (None clears an optional one); the next occurrence is recomputed.

        Giving ``cron`` switches an interval schedule to cron and the other way round.
        """
        changes: dict[str, Any] = {
            key: value
            for key, value in {
                "type": type,
                "payload": payload,
                "cron": cron,
                "every": every,
                "timezone": timezone,
                "subject": subject,
                "start_at": start_at,
                "end_at": end_at,
                "catch_up": catch_up,
                "on_gap": on_gap,
                "on_overlap": on_overlap,
                "max_attempts": max_attempts,
                "active": active,
            }.items()
            if value is not UNSET
        }
        if changes.get("cron") is not None and "every" not in changes:
            changes["every"] = None
        if changes.get("every") is not None and "cron" not in changes:
            changes["cron"] = None

        def define(current: Schedule) -> ScheduleRequest:
            return replace(ScheduleRequest.of(current), **changes)

        await self.open()
        return (await self._revise(check_schedule_name(name), define))[1]

    async def pause_schedule(self, name: str) -> Schedule:
        """Stop firing (occurrences made ahead of time are withdrawn) until resumed."""
        return await self.update_schedule(name, active=False)

    async def resume_schedule(self, name: str) -> Schedule:
        """Fire again from the next occurrence after now (the paused time is not caught up)."""
        return await self.update_schedule(name, active=True)

    async def delete_schedule(self, name: str) -> tuple[Schedule, int]:
        """Delete a schedule; its pending occurrences are cancelled (how many is returned)."""
        await self.open()
        deleted = await self.schedules.delete_schedule(
            self.namespace, check_schedule_name(name), self.clock.now()
        )
        if deleted is None:
            raise NotFound(
                f"no schedule named {name!r} in namespace {self.namespace!r}", field="name"
            )
        return deleted

    async def preview(
        self,
        cron: str | None = None,
        *,
        every: str | int | float | timedelta | None = None,
        timezone: str = "UTC",
        on_gap: str = "run_after",
        on_overlap: str = "once",
        start_at: str | datetime | None = None,
        end_at: str | datetime | None = None,
        after: str | datetime | None = None,
        count: int = 5,
        schedule: str | None = None,
    ) -> list[datetime]:
        """The next ``count`` occurrences (UTC) of a rule, or of the stored ``schedule``.

        From ``after`` (default: now; for a stored schedule, its next occurrence on).
        """
        stored = await self.get_schedule(schedule) if schedule is not None else None
        return preview_occurrences(
            stored,
            cron=cron,
            every=every,
            timezone=timezone,
            on_gap=on_gap,
            on_overlap=on_overlap,
            start_at=start_at,
            end_at=end_at,
            after=after,
            count=count,
            now=self.clock.now(),
        )

    async def _revise(
        self, name: str, define: Callable[[Schedule], ScheduleRequest]
    ) -> tuple[bool, Schedule]:
        """Read, revise and write with a version check; again if someone changed it meanwhile."""
        for _ in range(_REVISE_TRIES):
            current = await self.get_schedule(name)
            now = self.clock.now()
            revision = revise(
                current,
                define(current),
                now,
                self.settings.max_attempts,
                self.settings.max_payload_bytes,
            )
            if not revision.changed:
                return False, current
            saved = await self.schedules.save_schedule(
                revision.schedule, now, revision.release_after
            )
            if saved is not None:
                return True, saved
        raise Conflict(f"schedule {name!r} kept changing; try again", field="name")

    def materializer(self, **options: Any) -> Materializer:
        """A schedule materialiser for this app's namespace (``tick()`` or ``run(stop)``)."""
        from duetime.services.materializer import Materializer

        return Materializer(self.store, self.clock, self.namespace, **options)
