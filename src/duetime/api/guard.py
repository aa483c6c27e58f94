"""Browser-facing defences of the API, as one ASGI middleware around every request.

With auth off, any web page the user visits could talk to ``127.0.0.1:8080``: a cross-site
``text/plain`` POST or a body-less ``fetch(url, {method: "POST", mode: "no-cors"})`` needs no
CORS pre-flight (CSRF), and a hostile name resolving to 127.0.0.1 lets a page read the answers
(DNS rebinding). So:

- a state-changing request that names a ``Content-Type`` must name ``application/json`` (415
  otherwise), with a body or without one: a browser sends that type cross-site only after a
  pre-flight, which this API never grants;
- with auth off and ``allowed_hosts`` set (``duetime serve`` sets them from the bound address),
  the ``Host`` must be one of them (400), and a state-changing request must come from this very
  server's origin (403): its ``Origin``, when sent, must equal the scheme, host *and port* the
  request was made to (a page on ``http://127.0.0.1:9999`` is another site than the API on
  ``:8080``), and its ``Sec-Fetch-Site``, when sent, must say ``same-origin`` or ``none``.
  A request with neither header is answered: every browser sends ``Origin`` with every request
  but ``GET`` and ``HEAD`` (the Fetch standard), so only a program (curl, a script, the CLI)
  sends a ``POST`` without one, and a page cannot make it; the browsers of old that left it
  out did so only for form posts, whose body type is refused above;
- when the database cannot say in time whether auth is on (the cached answer is re-read every
  few seconds), the request is answered 503 with ``Retry-After``, as any busy read is;
- every answer says ``X-Content-Type-Options: nosniff`` and ``X-Frame-Options: DENY``; the
  dashboard adds its Content-Security-Policy (system.py).

With auth on, a request needs a token that no other site holds, so only the body type applies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from duetime.api.errors import BUSY_RETRY_AFTER, error_response
from duetime.api.hosts import LOCAL_HOSTS as LOCAL_HOSTS
from duetime.api.hosts import allowed_hosts_for as allowed_hosts_for
from duetime.api.hosts import host_name
from duetime.errors import StoreBusy

if TYPE_CHECKING:
    from duetime.api.service import Service

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
JSON_TYPE = "application/json"
_ALWAYS = [(b"x-content-type-options", b"nosniff"), (b"x-frame-options", b"DENY")]


class RequestGuard:
    """See the module: body type, Host and Origin checks, and the headers every answer has."""

    def __init__(self, app: ASGIApp, service: Service) -> None:
        self.app = app
        self.service = service
        hosts = service.settings.allowed_hosts
        self.allowed = None if hosts is None else frozenset(host_name(h) for h in hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers: dict[str, str] | None = None
        try:
            refusal = await self._refusal(scope, Headers(scope=scope))
        except StoreBusy as exc:  # re-reading whether auth is on: busy, never open
            refusal = 503, exc.code, exc.message, exc.field or "authorization"
            headers = {"Retry-After": BUSY_RETRY_AFTER}
        if refusal is not None:
            status, code, message, field = refusal
            response = error_response(status, code, message, field, headers)
            response.headers.update({k.decode(): v.decode() for k, v in _ALWAYS})
            await response(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *_ALWAYS]
            await send(message)

        await self.app(scope, receive, send_with_headers)

    async def _refusal(self, scope: Scope, headers: Headers) -> tuple[int, str, str, str] | None:
        unsafe = scope["method"] not in SAFE_METHODS
        if unsafe:
            media = headers.get("content-type")
            media = None if media is None else media.split(";", 1)[0].strip().lower()
            if (media is not None or _has_body(headers)) and media != JSON_TYPE:
                shown = media or "none"
                return 415, "unsupported_media_type", f"send {JSON_TYPE}, not {shown}", "body"
        if self.allowed is None or await self.service.auth_required():
            return None
        host = host_name(headers.get("host", ""))
        if host not in self.allowed:
            return 400, "host_not_allowed", f"this server does not answer to {host!r}", "host"
        if unsafe and not same_origin(scope, headers):
            return 403, "origin_not_allowed", "cross-site requests are refused", "origin"
        return None


Origin = tuple[str, str, int]
"""Scheme, host name and port: two URLs are the same origin when all three are equal."""

DEFAULT_PORTS = {"http": 80, "https": 443}
_SAME_SITE_FETCH = frozenset({"same-origin", "none"})
"""``Sec-Fetch-Site`` values of a request the page of this server (or the user) made."""


def same_origin(scope: Scope, headers: Headers) -> bool:
    """Whether a request comes from this server's own pages, or from no page at all (see the
    module): its ``Origin`` is the origin it was sent to, and ``Sec-Fetch-Site`` agrees."""
    site = headers.get("sec-fetch-site")
    if site is not None and site.strip().lower() not in _SAME_SITE_FETCH:
        return False
    origin = headers.get("origin")
    if origin is None:
        return True
    sent_from = origin_of(origin)
    return sent_from is not None and sent_from == request_origin(scope, headers)


def origin_of(value: str) -> Origin | None:
    """The origin an ``Origin`` header names; None for ``null`` or anything malformed."""
    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if not parts.hostname or scheme not in DEFAULT_PORTS or parts.path or parts.query:
        return None
    return scheme, parts.hostname.lower(), port if port is not None else DEFAULT_PORTS[scheme]


def request_origin(scope: Scope, headers: Headers) -> Origin | None:
    """The origin a request was sent to: the scheme it came in by (a trusted proxy's
    ``X-Forwarded-Proto`` included, as uvicorn applies it) and its ``Host``."""
    scheme = str(scope.get("scheme", "http")).lower()
    if scheme not in DEFAULT_PORTS:
        return None
    return origin_of(f"{scheme}://{headers.get('host', '').strip()}")


def _has_body(headers: Headers) -> bool:
    length = headers.get("content-length")
    return "transfer-encoding" in headers or (length is not None and length.strip() != "0")
