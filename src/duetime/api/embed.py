"""duetime's API and dashboard inside the user's own ASGI application, with or without a worker.

Starlette never runs a mounted application's lifespan, so a bare ``parent.mount("/duetime",
create_api())`` answers 503 ``store_unavailable``: its store never opens. :func:`mount` mounts
the API and folds its startup and shutdown into the parent's lifespan; :class:`Embedded`'s
:meth:`~Embedded.lifespan` is the same start and stop for a user who composes lifespans by hand.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from fastapi import FastAPI
from starlette.applications import Starlette

from duetime.api.app import create_api
from duetime.api.config import ApiSettings
from duetime.api.guard import LOCAL_HOSTS
from duetime.app.facade import AsyncApp, Store, create_store
from duetime.app.sync import App
from duetime.clock import DatabaseClock
from duetime.config import Settings
from duetime.errors import InvalidInput

log = logging.getLogger("duetime.api")

Target = App | AsyncApp | str | None
"""What :func:`mount` serves: the user's app, a database URL, or None for ``DUETIME_*``."""


def rebuilt_on(user: AsyncApp, store: Store) -> AsyncApp:
    """``user``'s handlers, routes and destinations on ``store``: a facade a server runs on its
    own event loop (the user's may live on another, e.g. :class:`~duetime.App`'s thread)."""
    # The user's own clock only if it is not its database's: that one reads the user's store.
    clock = None if isinstance(user.clock, DatabaseClock) else user.clock
    app = AsyncApp(settings=user.settings, store=store, clock=clock, producer=user.producer)
    app.registry = user.registry
    app.destinations = user.destinations
    app.routes = list(user.routes)
    app.observers.extend(user.observers)
    return app


class Embedded:
    """The mounted API (``api``), the facade it shares with the user's code, and their lifespan.

    With an :class:`AsyncApp` the API shares its store (one connection pool; the lifespan opens
    and closes it, so the app works in the parent's routes from startup on). A blocking
    :class:`~duetime.App` runs on a thread of its own, so the API gets a store of its own on the
    same database and, with a worker, a copy of the app's handlers on it.
    """

    def __init__(
        self,
        target: Target = None,
        *,
        worker: bool = False,
        auth: bool | None = None,
        allowed_hosts: Iterable[str] | None = LOCAL_HOSTS,
    ) -> None:
        user, settings = _resolve(target)
        if worker and user is None:
            raise InvalidInput(
                "worker", "worker=True runs an app's handlers: pass app=<your duetime.App>"
            )
        self.app: AsyncApp | None = None
        """The shared facade (an AsyncApp target), opened and closed by the lifespan."""
        if isinstance(user, AsyncApp):
            self.app = user
            store = user.store
        else:
            store = create_store(settings.database_url)
        workers: list[AsyncApp] = []
        if isinstance(user, App) and worker:
            workers = [rebuilt_on(user.core, store)]
        elif self.app is not None and worker:
            workers = [self.app]
        hosts = None if allowed_hosts is None else tuple(allowed_hosts)
        self.settings = ApiSettings(core=settings, auth=auth, allowed_hosts=hosts)
        clock = self.app.clock if self.app is not None else None
        self.api: FastAPI = create_api(self.settings, store=store, workers=workers, clock=clock)
        self._running = False

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        """Open the store (and the shared app), start the worker; on exit, stop the worker
        (its in-flight handlers finish within the shutdown grace) and close the store."""
        if self._running:
            raise RuntimeError(
                "duetime's lifespan is running already: mount() composes it into the parent's "
                "unless lifespan=False"
            )
        self._running = True
        try:
            async with self.api.router.lifespan_context(self.api):
                if self.app is not None:
                    await self.app.open()
                if not await self.api.state.duetime.auth_required():
                    log.warning(
                        "duetime's API answers without tokens (auth off): fine on a laptop; "
                        "anywhere else create one with 'duetime tokens create' or pass auth=True"
                    )
                yield
        finally:
            self._running = False
            if self.app is not None:
                await self.app.close()  # the store is closed already; this marks the app closed


def mount(
    parent: Starlette,
    path: str = "/duetime",
    *,
    app: Target = None,
    worker: bool = False,
    auth: bool | None = None,
    allowed_hosts: Iterable[str] | None = LOCAL_HOSTS,
    lifespan: bool = True,
) -> Embedded:
    """Serve duetime's API, dashboard and ``/docs`` under ``path`` of ``parent`` (FastAPI or
    Starlette), for ``app`` (a :class:`~duetime.App`/:class:`~duetime.AsyncApp`, a database URL,
    or None: ``DUETIME_*``); with ``worker`` the app's handlers run in this process too.

    ``lifespan`` (default) starts duetime before the parent's own startup code and stops it
    after its shutdown code, so both may schedule timers. With ``lifespan=False`` enter the
    returned :meth:`Embedded.lifespan` in your own lifespan, where your handlers need it.
    ``auth`` is as ``duetime serve --auth`` (None: on once any token has been created). With
    auth off, only requests whose ``Host`` (and a browser's ``Origin``) is in ``allowed_hosts`` are
    answered, loopback names by default, against DNS rebinding and cross-site requests (see
    guard.py): add the names your site is reached by, or None to answer any.
    """
    embedded = Embedded(app, worker=worker, auth=auth, allowed_hosts=allowed_hosts)
    parent.mount(mount_path(path), embedded.api, name="duetime")
    if lifespan:
        compose_lifespan(parent, embedded.lifespan)
    return embedded


def compose_lifespan(
    parent: Starlette, outer: Callable[[], AbstractAsyncContextManager[None]]
) -> None:
    """Run ``outer`` around ``parent``'s lifespan (its ``lifespan=``, or on_startup and
    on_shutdown handlers), whatever state that yields passed through."""
    router = parent.router
    inner = router.lifespan_context

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[Any]:
        async with outer(), inner(app) as state:
            yield state

    router.lifespan_context = lifespan


def mount_path(path: str, field: str = "path") -> str:
    """``path`` as a URL prefix without its trailing slash; InvalidInput naming ``field``."""
    if not isinstance(path, str) or not path.startswith("/") or path.rstrip("/") == "":
        raise InvalidInput(field, f"must be a prefix such as '/duetime', not {path!r}")
    if any(c in path for c in "?#{}% \t"):
        raise InvalidInput(field, f"must be a plain URL path, not {path!r}")
    return path.rstrip("/")


def _resolve(target: Target) -> tuple[App | AsyncApp | None, Settings]:
    if isinstance(target, App | AsyncApp):
        return target, target.settings
    if target is None or isinstance(target, str):
        return None, Settings.from_env(database_url=target)
    raise InvalidInput(
        "app", f"must be a duetime.App, an AsyncApp or a database URL, not {type(target).__name__}"
    )
