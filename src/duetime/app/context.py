"""What every part of an app shares: one store, clock, settings, namespace and actor, opened once.

The parts of :class:`duetime.app.facade.AsyncApp` (``app.timers``, ``app.schedules``…) are each
handed this one object when they are made, and read from it at each call: a clock swapped in by a
test, or settings a command line changed, reach every part at once, and no part reaches into the
facade. Whichever part is used first opens the store (and the namespace) for all of them.
"""

from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING

from duetime.clock import Clock, DatabaseClock
from duetime.config import DEFAULT_NAMESPACE, Settings
from duetime.destinations.registry import Destinations
from duetime.errors import UnknownNamespace
from duetime.model.audit import Actor
from duetime.observability.tracing import tracing_for
from duetime.store import Store
from duetime.store.parts import OutboxStore, require
from duetime.validation import check_namespace, check_producer
from duetime.worker.destination_limits import keep_destination_limits

if TYPE_CHECKING:
    from duetime.observability.otel import Tracing


class AppContext:
    """One app's store, clock, settings, namespace and actor, and whether the store is open.

    ``actor``: who operator calls (cancel, replay, delete, bulk, pause…) are made by when a call
    names none, written to the audit log with each; None writes them only when a call names its
    own. ``producer``: who stores the timers (the envelope's ``producer``), by default
    ``<host>-<pid>``, which this process's node ids start with. ``create_namespace``: whether
    opening creates the namespace (an app opens its own; else an unknown one is
    ``unknown_namespace``)."""

    def __init__(
        self,
        store: Store,
        clock: Clock | None = None,
        settings: Settings | None = None,
        namespace: str | None = None,
        *,
        actor: Actor | None = None,
        producer: str | None = None,
        create_namespace: bool = True,
        tracer_provider: object = None,
        destinations: Destinations | None = None,
        owns_store: bool = False,
    ) -> None:
        self.store = store
        self.clock: Clock = clock or DatabaseClock(store.db_now)
        self.settings = settings or Settings()
        self.namespace = check_namespace(namespace or self.settings.namespace)
        self.actor = actor
        self.producer = None if producer is None else check_producer(producer)
        self.create_namespace = create_namespace
        self.tracer_provider = tracer_provider
        self.destinations = destinations if destinations is not None else Destinations()
        self.tracing: Tracing | None = None
        """OpenTelemetry spans, once :meth:`open` has decided (``settings.tracing``)."""
        self.owns_store = owns_store
        """Whether closing closes the store (a store passed in is shared: not ours to close)."""
        self.opened = False

    async def open(self, *, create_namespace: bool | None = None) -> None:
        """Connect (and migrate) on first use. The namespace is created when
        ``create_namespace`` (else the app's own policy) says so, and ``default`` always, so a
        fresh database works with no set-up; any other unknown one is
        :class:`~duetime.errors.UnknownNamespace`."""
        if self.opened:
            return
        self.tracing = self.current_tracing()
        await self.store.open(migrate=self.settings.migrate)
        self.opened = True
        try:
            await self.sync_clock()
            await self.keep_sql_settings()
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

    async def close(self) -> None:
        """Close the destinations (they reconnect if used again) and, if it is ours, the store."""
        await self.destinations.close()
        if self.opened and self.owns_store:
            await self.store.close()
        self.opened = False

    async def open_store(self, *, migrate: bool | None = None) -> None:
        """Open the store without creating the namespace (what serves every namespace: tokens,
        namespaces, nodes, migrations)."""
        if not self.opened:
            await self.store.open(migrate=self.settings.migrate if migrate is None else migrate)
            self.opened = True
            await self.sync_clock()
            await self.keep_sql_settings()

    async def keep_sql_settings(self) -> None:
        """Give the store's SQL functions (where it has them) this app's caps and defaults,
        so a timer or schedule stored from SQL obeys what the Python path obeys."""
        access = self.store.sql_access
        if access is not None:
            settings = self.settings
            kept = {
                "max_payload_bytes": settings.max_payload_bytes,
                "max_attempts": settings.max_attempts,
                "max_schedules": settings.max_schedules,
            }
            await access.keep_settings(kept, self.clock.now())

    async def sync_clock(self) -> None:
        """Read the database's clock once, so "now" (a ``delay``, what is due) is its time
        from the first request on; a worker's clock service keeps it fresh."""
        if isinstance(self.clock, DatabaseClock) and self.clock.last is None:
            await self.clock.sync()

    def current_tracing(self) -> Tracing | None:
        """:attr:`tracing` once opened; before, what opening will decide."""
        if self.opened:
            return self.tracing
        return tracing_for(self.settings.tracing, self.tracer_provider)

    def producer_id(self) -> str:
        """Who stores the timers: ``producer``, else ``<host>-<pid>``."""
        return self.producer or f"{socket.gethostname()}-{os.getpid()}"

    def outbox(self, doing: str) -> OutboxStore:
        """The store's outbox part, for a call given the caller's own ``transaction``."""
        return require(self.store.outbox, "outbox", self.store, field="transaction", doing=doing)
