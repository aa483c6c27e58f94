"""The state one API process shares between requests: one store, facades per namespace, workers.

The store is opened once at startup and closed once at shutdown; every :class:`AsyncApp` here is
built on it with ``store=`` and is never closed itself (closing a facade closes its store).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from duetime.api import compat
from duetime.api.changes import Changes
from duetime.api.config import ApiSettings
from duetime.api.gates import NamespaceGates
from duetime.app.facade import AsyncApp, Store
from duetime.app.runner import Intake, Runner
from duetime.bus.subscribers import Subscribers
from duetime.clock import Clock, DatabaseClock
from duetime.model import Node
from duetime.observability.metrics import Metrics, read_snapshots
from duetime.services.nodes import NodeUpkeep
from duetime.services.startup import until_available
from duetime.services.upkeep import clock_services
from duetime.tenancy.auth import TokenInfo, TokenStore
from duetime.worker import new_node_id

if TYPE_CHECKING:
    from duetime.sources import Source

log = logging.getLogger("duetime.api")

TOUCH_EVERY = 60.0
"""Seconds between two ``last_used_at`` writes for one token (a write per request is waste)."""
AUTH_TTL = 2.0
"""Seconds the answer "was any token ever issued?" is reused: a token created while the
server runs turns auth on within this long, without a restart."""
COUNTS_TTL = 2.0
"""Seconds a scrape's pending/dead snapshot is reused, so dashboards polling do not pile up."""
NODES_TTL = 1.0
"""Seconds the nodes table, read for the timers' ``subscribers``, is reused: a burst of
``POST …/timers`` reads it once, and a node that starts or stops shows within a second (its
own heartbeat and the workers' routing take longer than that anyway)."""


class NamespaceApps:
    """One facade per existing namespace, all on the shared store, made on first use.

    A facade here never creates its namespace (``POST /v1/namespaces`` does), except
    ``default``, which every database has."""

    def __init__(self, settings: ApiSettings, store: Store, clock: Clock) -> None:
        self._settings = settings
        self._store = store
        self._clock = clock
        self._apps: dict[str, AsyncApp] = {}

    def new(self, namespace: str) -> AsyncApp:
        """A facade not yet opened (InvalidInput naming ``namespace`` for a malformed name)."""
        core = replace(self._settings.core, namespace=namespace)
        return AsyncApp(
            settings=core,
            store=self._store,
            clock=self._clock,
            producer="api",
            create_namespace=False,
        )

    async def existing(self, namespace: str) -> AsyncApp:
        """The facade of a namespace that exists; UnknownNamespace otherwise."""
        app = self._apps.get(namespace)
        if app is None:
            app = self.new(namespace)
            await app.open(create_namespace=False)
            self._apps[namespace] = app
        return app


class Service:
    """Everything a request handler needs, reached through ``request.app.state.duetime``."""

    def __init__(
        self,
        settings: ApiSettings,
        store: Store,
        *,
        metrics: Metrics,
        workers: Sequence[AsyncApp] = (),
        clock: Clock | None = None,
        sources: Sequence[Source] = (),
        sources_app: AsyncApp | None = None,
    ) -> None:
        if sources and sources_app is None:
            raise ValueError("sources need sources_app: the facade they store timers through")
        self.settings = settings
        self.store = store
        self.metrics = metrics
        self.clock: Clock = clock or DatabaseClock(store.db_now)
        self.namespaces = NamespaceApps(settings, store, self.clock)
        core = settings.core
        self.reads = NamespaceGates(
            core.reads_per_namespace, core.statement_timeout.total_seconds()
        )
        """Each namespace's reads take turns (see :mod:`duetime.api.gates`)."""
        self.root = AsyncApp(settings=settings.core, store=store, clock=self.clock)
        """For what is not per namespace (nodes, health); never opened, so it creates nothing."""
        self.worker_apps = list(workers)
        self.tokens: TokenStore | None = None
        self.auth = bool(settings.auth)
        self.node_id = new_node_id()
        self._touched: dict[int, float] = {}
        self._counts_at = -COUNTS_TTL
        self._auth_at = -AUTH_TTL
        self._nodes: list[Node] = []
        self._nodes_at = -NODES_TTL
        self.sources = list(sources)
        self.sources_app = sources_app
        self._runner: Runner | None = None
        self.changes = Changes(store.change_marker)
        """The live feed's poll of the database (see :mod:`duetime.api.live`)."""
        metrics.watch_sources(self.sources)
        metrics.watch_clock(self.clock)

    # -- lifecycle --------------------------------------------------------------------------
    async def start(self) -> None:
        try:
            # A server started while the database restarts waits for it rather than exit.
            await until_available(self._open, "opening the store", asyncio.Event())
            workers = []
            for app in self.worker_apps:
                if self.metrics not in app.observers:
                    app.observers.append(self.metrics)
                workers.append(app.worker())
                log.info(
                    "worker for namespace %s: types %s",
                    app.namespace,
                    ", ".join(app.registry.types) or "-",
                )
            core = self.settings.core
            api_node = NodeUpkeep(self.store, self.clock, core, self.node_id, "api")
            self._runner = Runner(
                workers,
                intake=self._intake(),
                services=[*clock_services(self.clock, core), api_node],
            )
            await self._runner.start()
        except BaseException:
            await self.stop()
            raise
        log.info("auth %s; api node %s", "on" if self.auth else "off", self.node_id)

    def _intake(self) -> Intake | None:
        """The sources storing through ``sources_app``, when there are any."""
        if not self.sources or self.sources_app is None:
            return None
        from duetime.sources import SourceIntake

        return SourceIntake(self.sources_app, self.sources)

    async def _open(self) -> None:
        """Open the store (migrating) and each worker's app: tried again as a whole while the
        store is unavailable (each step undoes itself when it fails)."""
        await self.store.open(migrate=self.settings.core.migrate)
        self.auth = await self._decide_auth()
        for app in self.worker_apps:
            await app.open()

    async def stop(self) -> None:
        """Stop consuming sources and claiming, let in-flight handlers finish, close the store
        (see :class:`~duetime.app.runner.Runner` for the order)."""
        self.changes.close()
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.stop()  # what failed is logged there
        for app in self.worker_apps:
            await app.destinations.close()  # the facades share the store: not closed one by one
        await self.store.close()

    async def _decide_auth(self) -> bool:
        wanted = self.settings.auth
        if wanted is False:
            return False
        self.tokens = self.store.tokens
        if wanted:
            return True
        self._auth_at = asyncio.get_running_loop().time()
        return await self.tokens.has_issued_tokens()

    # -- helpers for requests ---------------------------------------------------------------
    async def auth_required(self) -> bool:
        """Whether a request needs a token. Forced on or off by the settings; otherwise on once
        any token has been issued, and still on after the last one is revoked (revoking must
        never open the API to anyone: only ``auth=False``, ``--no-auth``, does that), re-read
        at most every :data:`AUTH_TTL` seconds."""
        if self.settings.auth is not None or self.tokens is None:
            return self.auth
        now = asyncio.get_running_loop().time()
        if now - self._auth_at >= AUTH_TTL:
            self._auth_at = now
            self.auth = await self.tokens.has_issued_tokens()
        return self.auth

    async def touch(self, token: TokenInfo) -> None:
        """Record a token's use, at most once a minute per token."""
        if self.tokens is None:
            return
        now = asyncio.get_running_loop().time()
        if now - self._touched.get(token.id, -TOUCH_EVERY) < TOUCH_EVERY:
            return
        self._touched[token.id] = now
        try:
            await self.tokens.touch_token(token.id, self.clock.now())
        except Exception:
            log.exception("could not record the use of token %d", token.id)

    async def refresh_counts(self) -> None:
        """Refresh the database gauges of every namespace (at most every 2 s)."""
        now = asyncio.get_running_loop().time()
        if now - self._counts_at < COUNTS_TTL:
            return
        self.metrics.set_snapshot(await read_snapshots(self.store, self.clock))
        watched = await self.store.deadlines.successes()
        self.metrics.schedule_watch.update(watched, self.clock.now())
        self._counts_at = now

    async def subscribers(self, namespace: str) -> Subscribers:
        """The live nodes that take each type in ``namespace``: one read of the nodes table
        (at most every :data:`NODES_TTL` seconds), whatever number of timers it answers for."""
        now = asyncio.get_running_loop().time()
        if now - self._nodes_at >= NODES_TTL:
            self._nodes = await compat.list_nodes(self.root)
            self._nodes_at = now
        return Subscribers.of(self._nodes, namespace, self.clock.now(), self.settings.core.lease)
