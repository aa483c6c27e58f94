"""Every failure as JSON ``{code, message, field}`` with a fitting status, never a bare 500.

Clients branch on ``code`` (stable) and ``field`` (what to fix); the same codes as the Python
API and the CLI. Malformed bodies, FastAPI's own validation and unknown routes get the same shape.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from duetime.api.pattern_errors import pattern_message
from duetime.api.responses import JSONResponse
from duetime.errors import (
    CapReached,
    Conflict,
    DuetimeError,
    InvalidInput,
    LeaseLost,
    NotFound,
    StoreBusy,
    StoreUnavailable,
)
from duetime.tenancy.auth import Forbidden, Unauthorized

log = logging.getLogger("duetime.api")


class InvalidJson(DuetimeError):
    """The request body is not JSON at all (400); well-formed but wrong JSON is a 422."""

    code = "invalid_json"


class PayloadTooLarge(DuetimeError):
    """The request body is over the size limit; it was not read to the end."""

    code = "payload_too_large"


_STATUS: tuple[tuple[type[DuetimeError], int], ...] = (
    (InvalidJson, 400),
    (Unauthorized, 401),
    (Forbidden, 403),
    (NotFound, 404),
    (Conflict, 409),
    (LeaseLost, 409),
    (PayloadTooLarge, 413),
    (InvalidInput, 422),
    (StoreUnavailable, 503),
)

_HTTP_CODES = {
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    415: "unsupported_media_type",
}


def status_for(error: DuetimeError) -> int:
    for kind, status in _STATUS:
        if isinstance(error, kind):
            return status
    return 400


BUSY_RETRY_AFTER = "1"
"""Seconds a client is told to wait when the database could not take its request in time."""


def error_response(
    status: int,
    code: str,
    message: str,
    field: str | None,
    headers: dict[str, str] | None = None,
    extra: dict[str, int] | None = None,
    *,
    outcome_unknown: bool = False,
) -> JSONResponse:
    """The error body; ``outcome_unknown`` (a 503 only): the write may have been stored."""
    body: dict[str, object] = {
        "code": code,
        "message": _printable(message),
        "field": field and _printable(field),
    }
    body.update(extra or {})
    if outcome_unknown:
        body["outcome_unknown"] = True
    return JSONResponse(body, status_code=status, headers=headers)


def _printable(text: str) -> str:
    """Echoed input can hold unpaired surrogates; never let them turn an error into a 500."""
    return text.encode("utf-8", "replace").decode("utf-8")


async def _duetime_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, DuetimeError)
    status = status_for(exc)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    if isinstance(exc, StoreBusy):
        headers = {"Retry-After": BUSY_RETRY_AFTER}
    extra = {"limit": exc.cap} if isinstance(exc, CapReached) else None
    unknown = isinstance(exc, StoreUnavailable) and exc.outcome_unknown
    return error_response(
        status, exc.code, exc.message, exc.field, headers, extra, outcome_unknown=unknown
    )


def _field_of(location: Any) -> str | None:
    """``("query", "limit")`` → ``limit``; ``("body", "payload", 0)`` → ``payload[0]``."""
    parts = [str(p) for p in location if p not in ("body", "query", "path", "header")]
    if not parts:
        return "body" if location and location[0] == "body" else None
    text = parts[0]
    for part in parts[1:]:
        text += f"[{part}]" if part.isdigit() else f".{part}"
    return text


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    if not errors:
        return error_response(422, InvalidInput.code, "the request is not valid", None)
    first = errors[0]
    field = _field_of(first.get("loc", ()))
    message = str(first.get("msg", "is not valid"))
    if first.get("type") == "string_pattern_mismatch":
        message = pattern_message(str(first.get("ctx", {}).get("pattern", "")), first.get("input"))
    if field:
        message = f"{field}: {message}"
    return error_response(422, InvalidInput.code, message, field)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = _HTTP_CODES.get(exc.status_code, "http_error")
    message = exc.detail if isinstance(exc.detail, str) else "request failed"
    headers = dict(exc.headers or {})
    if exc.status_code == 404:
        message = f"no such endpoint: {request.method} {request.url.path}"
    elif exc.status_code == 405:
        headers["Allow"] = ", ".join(allowed_methods(request))
    return error_response(exc.status_code, code, message, None, headers)


def allowed_methods(request: Request) -> list[str]:
    """Every method the path takes: the document's, for a documented path.

    The router answers 405 from the first route whose path matched, and one path is served by
    several routes (one per method, and a plain Starlette route beside the documented one), so that
    route's own methods are only part of the answer. A documented path answers with its
    operations (GET with HEAD); any other, with every method some route takes there.
    """
    path = request.scope["path"].removeprefix(request.scope.get("root_path", ""))
    for template, methods in _documented(request.app):
        if template.fullmatch(path):
            return [method for method in METHODS if method in methods]
    routes = request.app.router.routes
    return [
        method
        for method in METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] is Match.FULL for route in routes
        )
    ]


def _documented(app: Any) -> list[tuple[re.Pattern[str], set[str]]]:
    """Each documented path as a pattern (a parameter is one segment), with its methods."""
    found: list[tuple[re.Pattern[str], set[str]]] | None = getattr(app.state, "allow", None)
    if found is None:
        found = []
        for path, operations in app.openapi()["paths"].items():
            pattern = re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(path))
            methods = {method.upper() for method in operations}
            if "GET" in methods:
                methods.add("HEAD")
            found.append((re.compile(pattern), methods))
        app.state.allow = found
    return found


METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
"""The methods the API serves anywhere (it serves no OPTIONS or TRACE)."""


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.error("unexpected error in %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(500, "internal_error", "internal error; see the server log", None)


def install_error_handlers(app: FastAPI) -> None:
    """Route every exception through one JSON shape."""
    app.add_exception_handler(DuetimeError, _duetime_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
