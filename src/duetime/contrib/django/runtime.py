"""The process's one :class:`duetime.App`, made on first use from ``settings.DUETIME``.

Handlers are kept apart from the app (:data:`REGISTRY`), so registering them at start (each
app's ``duetime_handlers``) neither reads the settings nor fixes the database: the app is made
when first used, and made again when its settings change — as when Django's test runner
switches the connection to the test database. It is closed at exit.
"""

from __future__ import annotations

import atexit
import functools
import inspect
import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

from django.db import close_old_connections

from duetime.app.sync import App
from duetime.contrib.django.conf import duetime_settings, improperly_configured
from duetime.contrib.django.transactions import DjangoTransactions
from duetime.errors import InvalidInput
from duetime.handlers import HandlerRegistry

F = TypeVar("F", bound=Callable[..., Any])

REGISTRY = HandlerRegistry()
"""The project's handlers, shared by every app this module makes."""

_lock = threading.Lock()
_current: App | None = None


def get_app() -> App:
    """The process's app on the current ``settings.DUETIME`` (not connected until used)."""
    global _current
    settings = duetime_settings()
    with _lock:
        old = _current
        if old is not None and old.settings == settings:
            return old
        try:
            app = App(settings=settings)
        except InvalidInput as exc:
            raise improperly_configured(exc) from exc
        app.core.registry = REGISTRY
        if old is not None:  # routes and destinations registered on the old app carry over
            app.core.routes, app.core.destinations = old.core.routes, old.core.destinations
            old.close()
        _current = app
        return app


def close_app() -> None:
    """Close the process's app (it is made again on next use); run at exit."""
    global _current
    with _lock:
        app, _current = _current, None
    if app is not None:
        app.close()


atexit.register(close_app)


def handler(type: str, *, transactional: bool = False) -> Callable[[F], F]:
    """Register the decorated function for events of ``type`` (in a ``duetime_handlers``
    module, or one listed in ``DUETIME["HANDLERS"]``).

    ``transactional=True``: the function is called as ``func(event, connection)`` inside
    ``transaction.atomic()`` on Django's connection (``DUETIME["DATABASE_ALIAS"]``), the one
    the ORM uses in that thread, and the timer is marked done in that same transaction: the
    ORM's writes and the completion commit together, or (it raises) roll back together and the
    timer is retried. It must be a plain ``def``.
    """

    def register(func: F) -> F:
        if transactional:
            REGISTRY.register(
                type,
                func,
                transactional=True,
                transactions=DjangoTransactions(duetime_database_url),
            )
        elif inspect.iscoroutinefunction(func):
            REGISTRY.register(type, func)
        else:
            REGISTRY.register(type, _as_request(func))
        return func

    return register


def duetime_database_url() -> str:
    """duetime's database, read when a transactional handler first runs."""
    return get_app().settings.database_url


def _as_request(func: Callable[..., Any]) -> Callable[..., Any]:
    """``func`` between Django's connection upkeep of a request's start and end, so the
    handler thread's connections are closed or kept as ``CONN_MAX_AGE`` says, never broken."""

    @functools.wraps(func)
    def run(event: Any) -> Any:
        close_old_connections()
        try:
            return func(event)
        finally:
            close_old_connections()

    return run


class _LazyApp:
    """Forwards every attribute to :func:`get_app`'s app, so the name can be imported early."""

    def __getattr__(self, name: str) -> Any:
        return getattr(get_app(), name)

    def __repr__(self) -> str:
        return f"<duetime app of settings.DUETIME: {get_app().settings.namespace!r}>"


duetime_app = cast(App, _LazyApp())
"""``from duetime.contrib.django import duetime_app``: the process's app, made when first used."""
