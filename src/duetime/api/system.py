"""Routes that are not about one namespace: namespaces, nodes, info, health, metrics, dashboard."""

from __future__ import annotations

from dataclasses import replace
from importlib import resources
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response

from duetime import __version__
from duetime.api import compat
from duetime.api.deps import PrincipalDep, ServiceDep, actor_of, read_json
from duetime.api.errors import error_response
from duetime.api.responses import JSONResponse
from duetime.api.schemas import (
    HealthOut,
    InfoOut,
    MeOut,
    NamespaceOut,
    NamespacesOut,
    NodesOut,
    errors,
    json_body,
)
from duetime.app.facade import namespace_page
from duetime.bodies import Body, BodyField
from duetime.errors import DuetimeError, InvalidInput
from duetime.formats import NAMESPACE_PATTERN
from duetime.model import Node
from duetime.model.cursors import NAME_CURSOR_PATTERN
from duetime.model.tokens import ALL_NAMESPACES
from duetime.observability.metrics import CONTENT_TYPE
from duetime.tenancy.auth import Forbidden, TokenInfo
from duetime.validation import check_namespace

router = APIRouter()
SEND_NAME = 'send {"name": "<namespace>"}'
NAMESPACE_BODY = Body(
    "NamespaceIn",
    None,
    (
        BodyField(
            "name",
            {"type": "string", "pattern": NAMESPACE_PATTERN},
            "1-63 characters of a-z 0-9 _ . -, starting with a letter or digit",
            ("shop",),
            required=True,
            missing=f"is required: {SEND_NAME}",
        ),
    ),
    unknown=f"is not a known field: {SEND_NAME}",
)
"""``POST /v1/namespaces``: the name of the namespace to make."""


Limit = Annotated[int, Query(ge=1, le=1000, description="Page size")]
Cursor = Annotated[
    str | None,
    Query(description="`next_cursor` of the previous page", pattern=NAME_CURSOR_PATTERN),
]


@router.get(
    "/v1/namespaces",
    tags=["namespaces"],
    summary="The namespaces this token can see",
    response_model=NamespacesOut,
    responses=errors(401, 422),
)
async def list_namespaces(
    service: ServiceDep, who: PrincipalDep, cursor: Cursor = None, limit: Limit = 100
) -> JSONResponse:
    """By name, a page at a time (a database holds at most ``max_namespaces`` made through
    the API, the CLI and tokens); a token scoped to namespaces sees only those."""
    only = None if who is None or who.all_namespaces else who.namespaces
    found = await namespace_page(service.root.store, cursor, limit, only)
    return JSONResponse({"items": found.items, "next_cursor": found.next_cursor})


@router.post(
    "/v1/namespaces",
    tags=["namespaces"],
    summary="Create a namespace",
    status_code=201,
    response_model=NamespaceOut,
    responses=errors(400, 401, 403, 404, 422, extra={200: {"description": "It existed"}}),
    openapi_extra=json_body(NAMESPACE_BODY),
)
async def create_namespace(
    request: Request, service: ServiceDep, who: PrincipalDep
) -> JSONResponse:
    """Namespaces are made here (or by the CLI, or by an app opening its own), never by a
    write that names one: a typo would leave timers no worker serves. 201 when created, 200
    when it existed; a token may create the namespaces it can write."""
    data = await read_json(request, service.settings.body_limit)
    if isinstance(data, dict) and "name" not in data:  # before its other names: a misspelt name
        raise InvalidInput("name", NAMESPACE_BODY.required[0].missing)
    name = check_namespace(NAMESPACE_BODY.read(data)["name"], "name")
    if who is not None and not who.can_write(name):
        raise Forbidden(f"this token may not create namespace {name!r}", field="name")
    created = await service.root.namespaces.add(name, actor=actor_of(request, who))
    return JSONResponse({"name": name, "created": created}, status_code=201 if created else 200)


def _visible_node(node: Node, who: TokenInfo | None) -> Node | None:
    """The node as a token sees it: only its namespaces' subscriptions, and only nodes that
    subscribe to one of them (a node's host, pid and event types are its tenants' business)."""
    if who is None or who.all_namespaces:
        return node
    mine = tuple(s for s in node.subscriptions if who.can_read(s.namespace))
    return replace(node, subscriptions=mine) if mine else None


@router.get(
    "/v1/nodes",
    tags=["nodes"],
    summary="Registered nodes and their heartbeats",
    response_model=NodesOut,
    responses=errors(401),
)
async def list_nodes(service: ServiceDep, who: PrincipalDep) -> JSONResponse:
    """Alive while the heartbeat is younger than the lease. A token scoped to namespaces sees
    the nodes that subscribe to them, with those subscriptions only."""
    now = service.clock.now()
    lease = service.settings.core.lease
    nodes = [
        shown
        for node in await compat.list_nodes(service.root)
        if (shown := _visible_node(node, who)) is not None
    ]
    items = [{**node.to_dict(), "alive": now - node.heartbeat_at <= lease} for node in nodes]
    return JSONResponse({"items": items})


@router.get("/v1/info", tags=["system"], summary="Version and whether auth is on")
async def info(service: ServiceDep) -> InfoOut:
    """Open to all, so the dashboard knows whether to ask for a token."""
    return InfoOut(version=__version__, auth=await service.auth_required())


@router.get(
    "/v1/me",
    tags=["system"],
    summary="The caller's token, scopes and namespaces",
    response_model=MeOut,
    responses=errors(401),
)
async def me(who: PrincipalDep) -> JSONResponse:
    """What this caller may do, so a client (the console) shows only the controls that work:
    the token's name, its scopes and the namespaces it may read and change. Without auth
    (``auth: false``) anyone may do everything everywhere."""
    if who is None:
        every = [ALL_NAMESPACES]
        return JSONResponse(
            {
                "auth": False,
                "token": None,
                "token_id": None,
                "scopes": ["read", "write", "metrics"],
                "namespaces": every,
                "writable": every,
            }
        )
    scopes = ["read"] + ([] if who.read_only else ["write"])
    scopes += ["metrics"] if who.all_namespaces else []
    namespaces = list(who.namespaces)
    return JSONResponse(
        {
            "auth": True,
            "token": who.name,
            "token_id": who.id,
            "scopes": scopes,
            "namespaces": namespaces,
            "writable": [] if who.read_only else namespaces,
        }
    )


@router.get(
    "/healthz",
    tags=["system"],
    summary="Liveness and database check",
    response_model=HealthOut,
    responses=errors(503),
)
async def healthz(service: ServiceDep) -> JSONResponse:
    """200 while the database answers; 503 (never a hang or a 500) when it does not."""
    try:
        version = await compat.schema_version(service.root)
    except DuetimeError as exc:
        return error_response(503, "store_unavailable", exc.message, None)
    except Exception as exc:
        return error_response(
            503, "store_unavailable", f"the database does not answer: {exc}", None
        )
    return JSONResponse({"status": "ok", "schema_version": version})


@router.get(
    "/metrics",
    tags=["system"],
    summary="Prometheus metrics (text exposition format)",
    response_class=Response,
    responses=errors(401, 403, extra={200: {"content": {CONTENT_TYPE.split(";")[0]: {}}}}),
)
async def metrics(service: ServiceDep, who: PrincipalDep) -> Response:
    """With auth on, a token for every namespace (``*``) is needed: metrics span them all."""
    if who is not None and not who.all_namespaces:
        raise Forbidden("metrics cover every namespace: use a token created with '*'")
    await service.refresh_counts()
    return Response(service.metrics.render(), media_type=CONTENT_TYPE)


DASHBOARD_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
"""The dashboard loads only its own files and talks only to its own server."""


@router.get("/", include_in_schema=False)
async def dashboard() -> HTMLResponse:
    """The page; every URL in it is relative, so it works under any prefix (a mount, or a
    reverse proxy's ``--root-path``)."""
    page = resources.files("duetime.api").joinpath("static/index.html").read_text("utf-8")
    return HTMLResponse(page, headers={"Content-Security-Policy": DASHBOARD_CSP})
