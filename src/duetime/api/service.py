"""The state one API process shares between requests: one store, facades per namespace, workers.

The store is opened once at startup and closed once at shutdown; every :class:`AsyncApp` here is
built on it with ``store=`` and is never closed itself (closing a facade closes its store).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from duetime.api import compat
from duetime.api.config import ApiSettings
from duetime.app import AsyncApp
from duetime.auth import TokenInfo, TokenStore, token_store_for
from duetime.clock import Clock, SystemClock
from duetime.errors import InvalidInput
from duetime.metrics import Metrics
from duetime.model import Status
from duetime.store.protocol import Store
from duetime.worker import Worker, new_node_id

if TYPE_CHECKING:
    from duetime.sources import Source

log = logging.getLogger("duetime.api")

TOUCH_EVERY = 60.0
"""Seconds between two ``last_used_at`` writes for one token (a write per request is waste)."""
AUTH_TTL = 2.0
"""Seconds the answer "does any active token exist?" is reused: a token created while the
server runs turns auth on within this long, without a restart."""
COUNTS_TTL = 2.0
"""Seconds a scrape's pending/dead snapshot is reused, so dashboards polling do not pile up."""


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
        self.clock: Clock = clock or SystemClock()
        self.namespaces = NamespaceApps(settings, store, self.clock)
        self.root = AsyncApp(settings=settings.core, store=store, clock=self.clock)
        """For what is not per namespace (nodes, health); never opened, so it creates nothing."""
        self.worker_apps = list(workers)
        self.tokens: TokenStore | None = None
        self.auth = bool(settings.auth)
        self.node_id = new_node_id()
        self._touched: dict[int, float] = {}
        self._counts_at = -COUNTS_TTL
        self._auth_at = -AUTH_TTL
        self._workers: list[tuple[Worker, asyncio.Task[None]]] = []
        self._heartbeat: asyncio.Task[None] | None = None
        self.sources = list(sources)
        self.sources_app = sources_app
        self._sources_stop = asyncio.Event()
        self._sources_task: asyncio.Task[None] | None = None
        metrics.watch_sources(self.sources)

    # -- lifecycle --------------------------------------------------------------------------
    async def start(self) -> None:
        await self.store.open(migrate=self.settings.core.migrate)
        try:
            self.auth = await self._decide_auth()
            await compat.register_node(self.root, self.node_id, "api")
            self._heartbeat = asyncio.create_task(self._heartbeat_loop(), name="duetime-api-beat")
            for app in self.worker_apps:
                await app.open()
                if self.metrics not in app.observers:
                    app.observers.append(self.metrics)
                worker = app.worker()
                task = asyncio.create_task(worker.run(), name=f"duetime-worker-{app.namespace}")
                self._workers.append((worker, task))
                log.info(
                    "worker for namespace %s: types %s",
                    app.namespace,
                    ", ".join(app.registry.types) or "-",
                )
            if self.sources and self.sources_app is not None:
                await self._start_sources(self.sources_app)
        except BaseException:
            await self.stop()
            raise
        log.info("auth %s; api node %s", "on" if self.auth else "off", self.node_id)

    async def stop(self) -> None:
        """Stop consuming sources and claiming, let in-flight handlers finish, close the store.

        Sources stop first: a message taken in after the workers stopped would wait for the
        next start (it is stored, so not lost, but there is no reason to accept it late).
        """
        await self._stop_sources()
        for worker, _ in self._workers:
            worker.stop()
        for worker, task in self._workers:
            try:
                await task
            except Exception:
                log.exception("worker %s failed", worker.node_id)
        self._workers = []
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeat
            self._heartbeat = None
            try:
                await compat.deregister_node(self.root, self.node_id)
            except Exception:
                log.exception("could not deregister api node %s", self.node_id)
        for app in self.worker_apps:
            await app.destinations.close()  # the facades share the store: not closed one by one
        await self.store.close()

    async def _start_sources(self, app: AsyncApp) -> None:
        from duetime.sources import run_sources

        await app.open()
        self._sources_stop = asyncio.Event()
        self._sources_task = asyncio.create_task(
            run_sources(app, self.sources, self._sources_stop), name="duetime-sources"
        )
        self._sources_task.add_done_callback(_log_failure)
        log.info(
            "sources into namespace %s: %s",
            app.namespace,
            ", ".join(source.name for source in self.sources),
        )

    async def _stop_sources(self) -> None:
        task, self._sources_task = self._sources_task, None
        if task is None:
            return
        self._sources_stop.set()
        with contextlib.suppress(Exception):  # already logged by _log_failure
            await task

    async def _decide_auth(self) -> bool:
        wanted = self.settings.auth
        if wanted is False:
            return False
        try:
            self.tokens = token_store_for(self.store)
        except InvalidInput:
            if wanted:
                raise
            return False
        if wanted:
            return True
        self._auth_at = asyncio.get_running_loop().time()
        return await self.tokens.has_active_tokens()

    async def _heartbeat_loop(self) -> None:
        interval = self.settings.core.heartbeat.total_seconds()
        while True:
            await asyncio.sleep(interval)
            try:
                await compat.heartbeat(self.root, self.node_id)
            except Exception:
                log.exception("api heartbeat failed")

    # -- helpers for requests ---------------------------------------------------------------
    async def auth_required(self) -> bool:
        """Whether a request needs a token. Forced on or off by the settings; otherwise on
        while any active token exists, re-read at most every :data:`AUTH_TTL` seconds."""
        if self.settings.auth is not None or self.tokens is None:
            return self.auth
        now = asyncio.get_running_loop().time()
        if now - self._auth_at >= AUTH_TTL:
            self._auth_at = now
            self.auth = await self.tokens.has_active_tokens()
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
        """Refresh the pending/dead gauges from ``count_by_status`` (at most every 2 s)."""
        now = asyncio.get_running_loop().time()
        if now - self._counts_at < COUNTS_TTL:
            return
        counts: dict[str, dict[Status, int]] = {}
        for namespace in await compat.list_namespaces(self.root):
            app = await self.namespaces.existing(namespace)
            counts[namespace] = await app.counts()
        self.metrics.set_counts(counts)
        self._counts_at = now


def _log_failure(task: asyncio.Task[None]) -> None:
    """Say at once when the sources stopped on an error, not only at shutdown."""
    error = None if task.cancelled() else task.exception()
    if error is not None:
        log.error("sources stopped: %s", error, exc_info=error)
