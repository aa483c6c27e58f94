"""``/v1/namespaces/{namespace}/limits``, ``/pause``, ``/resume``: flow control over REST.

Bodies go through the facade (``set_limit``, ``pause``…), so a REST request is validated
exactly like a Python call, and bad input (``"rate": "fast"``) is a 422 naming the field.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from pydantic import BaseModel

from duetime.api.deps import ReadApp, ServiceDep, WriteApp, actor_of, read_json
from duetime.api.responses import JSONResponse
from duetime.api.schemas import errors, json_body
from duetime.bodies import Body, BodyField, Schema, not_null
from duetime.model import Page
from duetime.model.cursors import PATTERN_CURSOR_PATTERN
from duetime.model.flow_rules import MAX_CONCURRENCY, FlowRule, FlowStatus
from duetime.timemath.ratelimit import MAX_COUNT

router = APIRouter(prefix="/v1/namespaces/{namespace}", tags=["limits"])

PATTERN_RE = r"^[A-Za-z0-9_.:*\-/]{1,200}$"
Pattern = Annotated[
    str,
    Path(min_length=1, max_length=200, pattern=PATTERN_RE, description="An event type or glob"),
]
RATE_PATTERN = r"^(?:[1-9][0-9]{0,5}|1000000)/(?:(?:[1-9][0-9]?)?(?:s|min)|[1-9]?h|d)$"
"""Rates within the bounds: 1 to a million starts per period of at most a day (the server
also reads spellings such as ``100 / sec``)."""
PARTITION_PATTERN = r"^(?:subject|payload\.[A-Za-z0-9_-]{1,100})$"


def _limit_schema() -> Schema:
    """A concurrency or a rate (or both); a burst needs the rate, a partition the concurrency."""
    return {
        "anyOf": [not_null("concurrency"), not_null("rate")],
        "dependentSchemas": {
            "burst": {"anyOf": [_null("burst"), not_null("rate")]},
            "partition_by": {"anyOf": [_null("partition_by"), not_null("concurrency")]},
        },
    }


def _null(name: str) -> dict[str, Any]:
    return {"properties": {name: {"type": "null"}}}


Limit = Annotated[int, Query(ge=1, le=1000, description="Page size")]
Cursor = Annotated[
    str | None,
    Query(description="`next_cursor` of the previous page", pattern=PATTERN_CURSOR_PATTERN),
]


LIMIT_BODY = Body(
    "LimitBody",
    "A limit: a concurrency, a rate, or both.",
    (
        BodyField(
            "concurrency",
            {"type": "integer", "minimum": 1, "maximum": MAX_CONCURRENCY},
            "At most this many running at once",
            whole=True,
        ),
        BodyField(
            "rate",
            {"type": "string", "pattern": RATE_PATTERN},
            "At most N starts per period: 100/s, 6000/min",
        ),
        BodyField(
            "burst",
            {"type": "integer", "minimum": 1, "maximum": MAX_COUNT},
            "Starts a rate allows at once",
            whole=True,
        ),
        BodyField(
            "partition_by",
            {"type": "string", "pattern": PARTITION_PATTERN},
            "The concurrency applies per 'subject' or per 'payload.<field>'",
        ),
    ),
    _limit_schema,
    unknown="is not a field of a limit (concurrency, rate, burst, partition_by)",
)
"""``PUT …/limits/{pattern}``: read by :func:`set_limit`, shown by /openapi.json."""
PATTERN_BODY = Body(
    "PatternBody",
    None,
    (
        BodyField(
            "pattern",
            {"type": "string", "pattern": PATTERN_RE},
            "An event type or glob: email.*",
            required=True,
            missing="is required: an event type or glob, e.g. email.*",
        ),
    ),
    unknown='is not a field here: send {"pattern": ...}',
)
"""The body of ``POST …/pause`` and ``POST …/resume``."""


LIMIT_FIELDS = tuple(f.name for f in LIMIT_BODY.fields)


class LimitOut(BaseModel):
    namespace: str
    pattern: str
    concurrency: int | None
    rate: str | None
    burst: int | None
    partition_by: str | None
    paused: bool
    updated_at: str | None


class LimitStatusOut(LimitOut):
    running: int
    held: int
    oldest_held_at: str | None
    oldest_held_seconds: float | None


class LimitListOut(BaseModel):
    """By pattern; pass ``next_cursor`` as ``cursor`` for the next page (null at the end)."""

    items: list[LimitStatusOut]
    next_cursor: str | None


class LimitChangedOut(BaseModel):
    action: str
    limit: LimitOut | None


async def _object(request: Request, service: ServiceDep) -> Any:
    return await read_json(request, service.settings.body_limit)


def _answer(action: str, rule: FlowRule | None) -> JSONResponse:
    return JSONResponse({"action": action, "limit": None if rule is None else rule.to_dict()})


def _limit_fields(data: Any) -> dict[str, Any]:
    given = LIMIT_BODY.read(data)
    return {name: given.get(name) for name in LIMIT_FIELDS}


def _pattern_of(data: Any) -> str:
    pattern: str = PATTERN_BODY.read(data)["pattern"]
    return pattern


@router.get(
    "/limits",
    summary="List limits and pauses",
    response_model=LimitListOut,
    responses=errors(401, 403, 404, 422),
)
async def list_limits(app: ReadApp, cursor: Cursor = None, limit: Limit = 100) -> JSONResponse:
    """Each rule with what it holds now: attempts running, due timers held back, the oldest.
    A namespace holds at most ``max_limits`` rules; setting one more answers 422
    ``cap_reached`` with the ``limit``."""
    now = app.clock.now()
    page = await app.limits.page(cursor=cursor, limit=limit)
    # A page of a thousand rules is milliseconds of Python: on a thread, the event loop serves
    # other tenants' requests meanwhile (it gets the interpreter back every few milliseconds).
    return await asyncio.to_thread(_page_response, page, now)


def _page_response(page: Page[FlowStatus], now: datetime) -> JSONResponse:
    items = [status.to_dict(now) for status in page.items]
    return JSONResponse({"items": items, "next_cursor": page.next_cursor})


@router.put(
    "/limits/{pattern}",
    summary="Set a limit",
    response_model=LimitChangedOut,
    responses=errors(400, 401, 403, 404, 413, 422),
    openapi_extra=json_body(LIMIT_BODY),
)
async def set_limit(
    request: Request, app: WriteApp, service: ServiceDep, pattern: Pattern
) -> JSONResponse:
    """Replace the pattern's limit (a pause stays) on every node, from their next claim."""
    fields = _limit_fields(await _object(request, service))
    return _answer("set", await app.limits.set(pattern, **fields, actor=actor_of(request)))


@router.delete(
    "/limits/{pattern}",
    summary="Remove a limit",
    response_model=LimitChangedOut,
    responses=errors(401, 403, 404, 422),
)
async def remove_limit(request: Request, app: WriteApp, pattern: Pattern) -> JSONResponse:
    """Drop the pattern's limit (a pause stays); 404 when it has none."""
    await app.limits.remove(pattern, actor=actor_of(request))
    return _answer("removed", None)


@router.post(
    "/pause",
    summary="Pause event types",
    response_model=LimitChangedOut,
    responses=errors(400, 401, 403, 404, 413, 422),
    openapi_extra=json_body(PATTERN_BODY),
)
async def pause(request: Request, app: WriteApp, service: ServiceDep) -> JSONResponse:
    """Start none of the types the pattern matches, on any node; their timers wait in order."""
    pattern = _pattern_of(await _object(request, service))
    return _answer("paused", await app.limits.pause(pattern, actor=actor_of(request)))


@router.post(
    "/resume",
    summary="Resume paused event types",
    response_model=LimitChangedOut,
    responses=errors(400, 401, 403, 404, 413, 422),
    openapi_extra=json_body(PATTERN_BODY),
)
async def resume(request: Request, app: WriteApp, service: ServiceDep) -> JSONResponse:
    """The paused types start again, oldest due first; 404 when the pattern is not paused."""
    await app.limits.resume(_pattern_of(await _object(request, service)), actor=actor_of(request))
    return _answer("resumed", None)
