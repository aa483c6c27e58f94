"""Who is asking and which namespace facade they get: auth and tenancy checks, once per request.

A namespace the token may not see answers exactly like one that does not exist (404 naming
``namespace``), so token holders cannot discover other tenants' names.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Annotated, Any, cast

from fastapi import Depends, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from duetime.api.errors import InvalidJson, PayloadTooLarge
from duetime.api.service import Service
from duetime.app.facade import AsyncApp
from duetime.errors import NotFound, UnknownNamespace
from duetime.formats import NAMESPACE_PATTERN
from duetime.model.audit import Actor, Via
from duetime.tenancy.auth import Forbidden, TokenInfo, Unauthorized, authenticate, bearer_token

bearer = HTTPBearer(
    auto_error=False,
    description="A token from `duetime tokens create` (only when the server runs with auth).",
)

NamespacePath = Annotated[
    str, Path(description="The tenant, e.g. `default`", pattern=NAMESPACE_PATTERN)
]


def service_of(request: Request) -> Service:
    return cast(Service, request.app.state.duetime)


async def get_service(request: Request) -> Service:
    """Async though it does not wait: FastAPI runs a plain-function dependency in a worker
    thread, a hop every request would pay for."""
    return service_of(request)


ServiceDep = Annotated[Service, Depends(get_service)]
BearerDep = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]


async def principal_of(
    request: Request, service: Service, credentials: HTTPAuthorizationCredentials | None
) -> TokenInfo | None:
    """The caller's token, or None when auth is off; Unauthorized when it is on and missing."""
    if not await service.auth_required():
        return None
    if service.tokens is None:  # pragma: no cover - auth on implies a token store
        raise Unauthorized("this server has no token store")
    token = (
        credentials.credentials
        if credentials is not None
        else bearer_token(request.headers.get("authorization"))
    )
    info = await authenticate(service.tokens, token)
    await service.touch(info)
    return info


async def get_principal(
    request: Request, service: ServiceDep, credentials: BearerDep
) -> TokenInfo | None:
    return await principal_of(request, service, credentials)


PrincipalDep = Annotated[TokenInfo | None, Depends(get_principal)]


def unknown_namespace(namespace: str) -> NotFound:
    return UnknownNamespace(namespace)


def require_visible(principal: TokenInfo | None, namespace: str) -> None:
    if principal is not None and not principal.can_read(namespace):
        raise unknown_namespace(namespace)


def require_writable(principal: TokenInfo | None, namespace: str) -> None:
    require_visible(principal, namespace)
    if principal is not None and not principal.can_write(namespace):
        raise Forbidden(f"this token is read-only for namespace {namespace!r}", field="namespace")


# The facades below take the service and the token themselves rather than as dependencies of
# their own: FastAPI's resolution of each dependency costs every request more than the work.
async def visible(namespace: NamespacePath, request: Request, credentials: BearerDep) -> AsyncApp:
    """The facade of an existing namespace the caller may read, taking no turn: for a stream
    that stays open (``/live``) and reads nothing itself."""
    service = service_of(request)
    require_visible(await principal_of(request, service, credentials), namespace)
    return await service.namespaces.existing(namespace)


async def readable(
    namespace: NamespacePath, request: Request, credentials: BearerDep
) -> AsyncIterator[AsyncApp]:
    """The facade of an existing namespace the caller may read, during one of the namespace's
    turns to read (:mod:`duetime.api.gates`), taken once the caller is known to may."""
    service = service_of(request)
    require_visible(await principal_of(request, service, credentials), namespace)
    app = await service.namespaces.existing(namespace)
    async with service.reads.turn(namespace):
        yield app


async def writable(namespace: NamespacePath, request: Request, credentials: BearerDep) -> AsyncApp:
    """The facade of an existing namespace the caller may change; who the caller is stays on
    the request, for the audit log (:func:`actor_of`)."""
    service = service_of(request)
    principal = await principal_of(request, service, credentials)
    require_writable(principal, namespace)
    request.state.principal = principal
    return await service.namespaces.existing(namespace)


CLIENT_HEADER = "x-duetime-client"
"""The console sends ``X-Duetime-Client: console`` with every request, so the audit log can
tell its actions from a script's with the same token. Anyone may send it: it names the
interface, never who acts (the token does)."""


def via_of(request: Request) -> Via:
    """``console`` when the dashboard sent the request, else ``api``."""
    return "console" if request.headers.get(CLIENT_HEADER) == "console" else "api"


def actor_of(request: Request, principal: TokenInfo | None = None) -> Actor:
    """Who makes this request, as the audit log names them: the token :func:`writable` let in
    (``token:<name>``), or ``api:anonymous`` when the server runs without auth; through the
    console or the API."""
    who = principal or getattr(request.state, "principal", None)
    return Actor.of_token(who, via_of(request))


def operator_of(request: Request) -> Actor | None:
    """The actor of a timer created or an event emitted by this request, when an operator
    made it in the console; None for an application's own writes (the timer is their record,
    and writing an entry for each would double the cost of the busiest route)."""
    return actor_of(request) if via_of(request) == "console" else None


async def writable_of(request: Request) -> AsyncApp:
    """:func:`writable` for a route outside FastAPI's dependency solving (see
    :mod:`duetime.api.plain_routes`): the namespace from the path (its convertor checked it),
    the token from the Authorization header, the same answers."""
    namespace: str = request.path_params["namespace"]
    service = service_of(request)
    principal = await principal_of(request, service, None)
    require_writable(principal, namespace)
    request.state.principal = principal
    return await service.namespaces.existing(namespace)


ReadApp = Annotated[AsyncApp, Depends(readable)]
VisibleApp = Annotated[AsyncApp, Depends(visible)]
WriteApp = Annotated[AsyncApp, Depends(writable)]


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


async def read_json(request: Request, limit: int) -> Any:
    """The body as JSON, read no further than ``limit`` bytes (413 naming ``payload`` beyond)."""
    too_large = PayloadTooLarge(
        f"the request body is over the {limit} byte limit (payload included)", field="payload"
    )
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_large
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw.strip():
        raise InvalidJson("the body is empty: send a JSON object", field="body")
    try:
        data = json.loads(raw, parse_constant=_no_constants)
    except UnicodeDecodeError:
        raise InvalidJson("the body is not UTF-8 JSON", field="body") from None
    except json.JSONDecodeError as exc:
        raise InvalidJson(
            f"the body is not valid JSON: {exc.msg} at position {exc.pos}", field="body"
        ) from None
    except (ValueError, RecursionError) as exc:
        raise InvalidJson(f"the body is not valid JSON: {exc}", field="body") from None
    if b"\\u" in raw:  # only escapes can smuggle in an unpaired surrogate
        _reject_surrogates(data)
    return data


def _reject_surrogates(data: Any) -> None:
    """``"\\ud800"`` parses to a str no database can store: refuse it, naming the field."""
    if _encodes(data):
        return
    field = "body"
    if isinstance(data, dict):
        for name, value in data.items():
            if not _encodes(value):
                field = name if _encodes(name) else "body"
                break
    raise InvalidJson(
        f"{field}: contains an unpaired UTF-16 surrogate (not valid Unicode)", field=field
    )


def _encodes(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
