"""duetime's REST API and dashboard beside Django in one ASGI application, under a prefix.

``application = with_duetime(get_asgi_application())`` in the project's ``asgi.py``: requests
under ``/duetime`` go to duetime's API (which sees the prefix as its ``root_path``), the rest to
Django, and the lifespan (which Django's handler does not speak) to duetime's API alone, which
opens its store at start-up. Needs the ``server`` extra.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

from duetime.api.guard import LOCAL_HOSTS
from duetime.contrib.django.conf import duetime_settings

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def with_duetime(
    django: ASGIApp,
    prefix: str = "/duetime",
    *,
    api: ASGIApp | None = None,
    auth: bool | None = None,
    allowed_hosts: Iterable[str] | None = LOCAL_HOSTS,
) -> ASGIApp:
    """``django`` with duetime's API at ``prefix``: ``api``, else one built from
    ``settings.DUETIME`` (no worker: that is ``manage.py duetime_worker``).

    ``auth`` is as ``duetime serve --auth`` (None: on once any token has been created). With
    auth off, the API answers only requests whose ``Host`` (and a browser's ``Origin``) is in
    ``allowed_hosts`` — loopback names by default, against DNS rebinding: add the names your
    site is reached by, or None to answer any (Django's ALLOWED_HOSTS guards Django's part).
    """
    if not prefix.startswith("/") or prefix.endswith("/"):
        raise ValueError(f"prefix must start with '/' and not end with one, not {prefix!r}")
    if api is None:
        api = duetime_api(auth=auth, allowed_hosts=allowed_hosts)
    return PrefixRouter(django, prefix, api)


def duetime_api(
    *, auth: bool | None = None, allowed_hosts: Iterable[str] | None = LOCAL_HOSTS
) -> ASGIApp:
    """duetime's API on this project's duetime settings."""
    from duetime.api.app import create_api
    from duetime.api.config import ApiSettings

    hosts = None if allowed_hosts is None else tuple(allowed_hosts)
    settings = ApiSettings(core=duetime_settings(), auth=auth, allowed_hosts=hosts)
    api: ASGIApp = create_api(settings)
    return api


class PrefixRouter:
    """Sends requests under ``prefix`` to ``mounted`` and the rest to ``default``."""

    def __init__(self, default: ASGIApp, prefix: str, mounted: ASGIApp) -> None:
        self.default = default
        self.prefix = prefix
        self.mounted = mounted

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.mounted(scope, receive, send)
            return
        path: str = scope.get("path", "")
        root: str = scope.get("root_path", "")
        inner = path[len(root) :] if root and path.startswith(root) else path
        if inner == self.prefix or inner.startswith(self.prefix + "/"):
            # Starlette reads the route from the full path less root_path (ASGI's convention).
            await self.mounted({**scope, "root_path": root + self.prefix}, receive, send)
            return
        await self.default(scope, receive, send)
