"""The facade users touch: schedule, emit, cancel, get, history, handlers, and the worker.

:class:`AsyncApp` is the core; :class:`duetime.sync.App` wraps it for code that is not async.
The CLI and the REST API talk only to this facade.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import date as date_type
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, TypeVar

from duetime.clock import Clock, SystemClock
from duetime.config import Settings
from duetime.errors import InvalidInput, NotFound
from duetime.handlers import HandlerFunc, HandlerRegistry
from duetime.model import (
    JSON,
    Attempt,
    NewTimer,
    Node,
    OnConflict,
    Page,
    PutResult,
    Status,
    Timer,
    TimerFilter,
)
from duetime.requests import TimerRequest
from duetime.store import Store, create_store
from duetime.validation import check_key, check_limit, check_namespace, check_type
from duetime.worker import Worker, WorkerObserver, WorkerStats

F = TypeVar("F", bound=HandlerFunc)
_ON_CONFLICT = ("update", "keep", "error")


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
        **overrides: Any,
    ) -> None:
        if settings is None:
            settings = Settings.from_env(
                database_url=database_url, namespace=namespace, **overrides
            )
        self.settings = settings
        self.namespace = check_namespace(settings.namespace)
        self.clock: Clock = clock or SystemClock()
        self.store: Store = store or create_store(settings.database_url)
        self.registry = HandlerRegistry()
        self.observers: list[WorkerObserver] = []
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
        if self._opened:
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
    def handler(self, type: str) -> Callable[[F], F]:
        """Register the decorated function (sync or async) for events of ``type``."""

        def register(func: F) -> F:
            self.registry.register(type, func)
            return func

        return register

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
    ) -> PutResult:
        """Store one timer; the answer says whether it was created, updated or kept."""
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
        (result,) = await self.schedule_many([request], on_conflict=on_conflict)
        return result

    async def schedule_many(
        self, requests: Iterable[TimerRequest], *, on_conflict: OnConflict = "update"
    ) -> list[PutResult]:
        """Store many timers in one transaction: all of them, or (on bad input) none."""
        timers = self.prepare(requests)
        return await self.put(timers, on_conflict=on_conflict)

    def prepare(self, requests: Iterable[TimerRequest]) -> list[NewTimer]:
        """Validate requests into storable timers (raises InvalidInput naming the field)."""
        now = self.clock.now()
        timers = []
        for index, request in enumerate(requests):
            try:
                timers.append(
                    request.resolve(
                        self.namespace,
                        now,
                        self.settings.max_attempts,
                        self.settings.max_payload_bytes,
                    )
                )
            except InvalidInput as exc:
                if index == 0 and not timers:
                    raise
                raise InvalidInput(f"[{index}].{exc.field}", exc.message) from exc
        return timers

    async def put(
        self, timers: Sequence[NewTimer], *, on_conflict: OnConflict = "update"
    ) -> list[PutResult]:
        if on_conflict not in _ON_CONFLICT:
            raise InvalidInput("on_conflict", f"must be one of {', '.join(_ON_CONFLICT)}")
        await self.open()
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
    ) -> PutResult:
        """Emit an event now: a timer due at once, delivered like any other."""
        return await self.schedule(
            type,
            payload,
            delay=0,
            key=key,
            subject=subject,
            correlation_id=correlation_id,
            max_attempts=max_attempts,
            on_conflict="keep",
        )

    # -- reading and changing ---------------------------------------------------------------
    async def get(self, key: str) -> Timer:
        await self.open()
        timer = await self.store.get_timer(self.namespace, check_key(key))
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
        return await self.store.cancel(self.namespace, check_key(key), self.clock.now())

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
        return await self.store.replay(self.namespace, check_key(key), self.clock.now())

    async def counts(self) -> dict[Status, int]:
        await self.open()
        return await self.store.count_by_status(self.namespace)

    # -- working ----------------------------------------------------------------------------
    def worker(self, *, types: Sequence[str] | None = None, node_id: str | None = None) -> Worker:
        """A worker for this app's namespace and handlers (call ``run()`` or ``tick()``)."""
        return Worker(
            self.store,
            self.registry,
            self.settings,
            self.clock,
            namespace=self.namespace,
            types=types,
            node_id=node_id,
            observers=self.observers,
        )

    async def run_worker(self, **kwargs: Any) -> None:
        await self.open()
        await self.worker(**kwargs).run()

    async def tick(self) -> WorkerStats:
        """Fire everything due now once and return what happened (cron / serverless entry)."""
        await self.open()
        return await self.worker().tick()
