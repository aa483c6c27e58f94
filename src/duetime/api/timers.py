"""``/v1/namespaces/{namespace}/…``: schedule, list, show, cancel, emit, dead letters, stats.

Bodies go through :meth:`TimerRequest.from_dict` and the facade, so a REST request is validated
exactly like a Python ``schedule(...)`` call, and bad input stores nothing.
"""

from __future__ import annotations

from typing import Annotated, Any, cast

from fastapi import APIRouter, Path, Query, Request
from pydantic import BaseModel, Field
from starlette.responses import Response

from duetime.api import compat
from duetime.api.deps import (
    ReadApp,
    ServiceDep,
    WriteApp,
    actor_of,
    operator_of,
    read_json,
    service_of,
)
from duetime.api.pages import page_response
from duetime.api.responses import JSONResponse
from duetime.api.schemas import (
    CURSOR,
    MAX_PAYLOAD_QUERY_LENGTH,
    PAYLOAD_DESCRIPTION,
    SORT_DESCRIPTION,
    TYPE_GLOB_PATTERN,
    WHEN,
    ChangedOut,
    CountsOut,
    PutOut,
    StatsOut,
    StatusName,
    TimerDetailOut,
    TimerPageOut,
    TypePattern,
    errors,
    json_body,
)
from duetime.api.service import Service
from duetime.app.facade import AsyncApp
from duetime.bodies import BodyField
from duetime.errors import Conflict
from duetime.formats import PAYLOAD_MATCH_PATTERN, WHEN_PATTERN
from duetime.model import OnConflict, Page, PutResult, Status, Timer
from duetime.model.cursors import ID_CURSOR_PATTERN
from duetime.model.finding import TIMER_CURSOR_PATTERN, TimerSort
from duetime.requests import IDENTIFIER, TIMER_BODY, TimerRequest
from duetime.schedule_bodies import SCHEDULE_NAME_PATTERN
from duetime.validation import (
    MAX_STORED_KEY_LENGTH,
    MAX_SUBJECT_LENGTH,
    ON_CONFLICT_MODES,
    check_on_conflict,
)

router = APIRouter(prefix="/v1/namespaces/{namespace}", tags=["timers"])

UNSUBSCRIBED_TYPES = 20
"""Types the overview lists as waiting for a subscriber, most timers first."""
PUT_BODY = TIMER_BODY.plus(
    BodyField("on_conflict", {"type": "string", "enum": list(ON_CONFLICT_MODES)}, default="update"),
    title="TimerBody",
)
"""``POST …/timers``: a timer request, and what to do with an existing key."""
EVENT_BODY = TIMER_BODY.only(
    ("type", "payload", "key", "subject", "correlation_id", "max_attempts", "priority"),
    "EventBody",
    "Emit an event now: a timer due at once (an existing key is kept).",
    None,
)
"""``POST …/events``: a timer request's fields but its due time (now) and its expiry."""
Limit = Annotated[int, Query(ge=1, le=1000, description="Page size")]
Cursor = Annotated[str | None, Query(description=CURSOR, pattern=ID_CURSOR_PATTERN)]
TypeQuery = Annotated[
    str | None, Query(description=TypePattern, pattern=TYPE_GLOB_PATTERN, max_length=200)
]
Key = Annotated[
    str,
    Path(
        min_length=1,
        max_length=MAX_STORED_KEY_LENGTH,
        pattern=IDENTIFIER,
        description="The timer's key (a delivery's is its event's key + '@' + destination)",
    ),
]


async def _put_answer(request: Request, app: AsyncApp, result: PutResult) -> JSONResponse:
    """The timer with its ``subscribers``, and a ``no_subscriber`` warning when no live node
    would deliver it: stored all the same, but it would wait without a word."""
    status = 201 if result.action == "created" else 200
    found = await service_of(request).subscribers(app.namespace)
    answer = {
        "action": result.action,
        "timer": found.shown(result.timer),
        "warnings": found.warnings(result.timer),
    }
    return JSONResponse(answer, status)


async def _page(service: Service, app: AsyncApp, page: Page[Timer]) -> Response:
    found = await service.subscribers(app.namespace)
    return await page_response(page, found.shown, service.settings.core.page_bytes)


async def shown(service: Service, app: AsyncApp, timer: Timer) -> dict[str, Any]:
    """One timer as the API answers it: with how many live nodes would deliver it."""
    return (await service.subscribers(app.namespace)).shown(timer)


@router.post(
    "/timers",
    summary="Schedule a timer",
    status_code=201,
    response_model=PutOut,
    responses=errors(
        400,
        401,
        403,
        404,
        409,
        413,
        422,
        extra={200: {"model": PutOut, "description": "Updated or kept"}},
    ),
    openapi_extra=json_body(PUT_BODY),
)
async def schedule_timer(request: Request, app: WriteApp) -> JSONResponse:
    """Create (201), or update / keep an existing key (200); `action` says which."""
    return await put_timer(request, app)


async def put_timer(request: Request, app: AsyncApp) -> JSONResponse:
    """The body of ``POST …/timers``, for its documented route and its plain one
    (:mod:`duetime.api.plain_routes`)."""
    data = await read_json(request, service_of(request).settings.body_limit)
    on_conflict: object = "update"
    if isinstance(data, dict):
        on_conflict = data.pop("on_conflict", "update")
    check_on_conflict(on_conflict)
    timer_request = TimerRequest.from_dict(data)
    (result,) = await app.timers.schedule_many(
        [timer_request], on_conflict=cast(OnConflict, on_conflict)
    )
    await app.audit.record_put(operator_of(request), "schedule", result)
    return await _put_answer(request, app, result)


@router.get(
    "/timers",
    summary="List timers, newest first",
    response_model=TimerPageOut,
    responses=errors(401, 404, 422),
)
async def list_timers(
    app: ReadApp,
    service: ServiceDep,
    subject: Annotated[
        str | None,
        Query(
            description="Only timers about this subject",
            pattern=IDENTIFIER,
            max_length=MAX_SUBJECT_LENGTH,
        ),
    ] = None,
    status: Annotated[StatusName | None, Query(description="Only this status")] = None,
    type: TypeQuery = None,
    due_from: Annotated[
        str | None, Query(description=f"Due at or after: {WHEN}", pattern=WHEN_PATTERN)
    ] = None,
    due_until: Annotated[
        str | None, Query(description=f"Due before: {WHEN}", pattern=WHEN_PATTERN)
    ] = None,
    payload: Annotated[
        str | None,
        Query(
            description=PAYLOAD_DESCRIPTION,
            min_length=1,
            max_length=MAX_PAYLOAD_QUERY_LENGTH,
            pattern=PAYLOAD_MATCH_PATTERN,
        ),
    ] = None,
    sort: Annotated[TimerSort, Query(description=SORT_DESCRIPTION)] = "newest",
    cursor: Annotated[str | None, Query(description=CURSOR, pattern=TIMER_CURSOR_PATTERN)] = None,
    limit: Limit = 50,
    schedule: Annotated[
        str | None,
        Query(
            description="Only the occurrences of this schedule (its name)",
            max_length=200,
            pattern=SCHEDULE_NAME_PATTERN,
        ),
    ] = None,
) -> Response:
    """A keyset walk by id, or by the sort's (value, id) (no OFFSET): every page costs what
    the first does."""
    page = await app.timers.history(
        subject,
        status=status,
        type=type,
        due_from=due_from,
        due_until=due_until,
        payload=payload,
        sort=sort,
        cursor=cursor,
        limit=limit,
        schedule=schedule,
    )
    return await _page(service, app, page)


@router.get(
    "/timers/{key:path}",
    summary="One timer, its attempts and its moves by new zone rules",
    response_model=TimerDetailOut,
    responses=errors(401, 404, 422),
)
async def show_timer(app: ReadApp, key: Key, service: ServiceDep) -> JSONResponse:
    """``subscribers``: the live nodes that would deliver it (0: no handler or route anywhere)."""
    timer = await app.get(key)
    attempts = await app.timers.attempts(key)
    moves = await app.timers.moves(key)
    return JSONResponse(
        {
            "timer": await shown(service, app, timer),
            "attempts": [attempt.to_dict() for attempt in attempts],
            "moves": [move.to_dict() for move in moves],
        }
    )


@router.delete(
    "/timers/{key:path}",
    summary="Cancel a pending timer (the same answer when repeated)",
    response_model=ChangedOut,
    responses=errors(401, 403, 404, 409, 422),
)
async def cancel_timer(
    request: Request, app: WriteApp, key: Key, service: ServiceDep
) -> JSONResponse:
    """A scheduled or retrying timer is cancelled (`action: cancelled`). A DELETE sent again —
    as an HTTP client does when the first answer was lost — answers the same for the timer it
    cancelled, which stays as it is. Any other timer is a 409: a running one (let it finish),
    or one that finished otherwise (done, dead, expired). Nothing is ever erased here: deleting
    a finished timer and its history is `POST …/timers/{key}/purge`."""
    try:
        timer = await app.cancel(key, actor=actor_of(request))
    except Conflict:
        timer = await app.get(key)
        if timer.status is not Status.CANCELLED:
            raise
        # cancelled already (a repeated request): nothing changes, nothing to audit
        return JSONResponse({"action": "cancelled", "timer": await shown(service, app, timer)})
    service.metrics.cancelled(timer.namespace, timer.type)
    return JSONResponse({"action": "cancelled", "timer": await shown(service, app, timer)})


@router.post(
    "/timers/{key:path}/purge",
    summary="Delete a finished timer with its attempts and history",
    response_model=ChangedOut,
    responses=errors(401, 403, 404, 409, 422),
)
async def purge_timer(
    request: Request, app: WriteApp, key: Key, service: ServiceDep
) -> JSONResponse:
    """A done, dead, cancelled or expired timer is deleted with its attempts and archived
    history (`action: deleted`, the timer as it was); its key may then be scheduled again. A
    pending timer is a 409 (cancel it first), a running one too (let it finish); sent again
    after it succeeded, a 404."""
    timer = await app.timers.delete(key, actor=actor_of(request))
    return JSONResponse({"action": "deleted", "timer": await shown(service, app, timer)})


@router.post(
    "/events",
    summary="Emit an event now",
    status_code=201,
    response_model=PutOut,
    responses=errors(
        400,
        401,
        403,
        404,
        413,
        422,
        extra={200: {"model": PutOut, "description": "The key existed: kept"}},
    ),
    openapi_extra=json_body(EVENT_BODY),
)
async def emit_event(request: Request, app: WriteApp) -> JSONResponse:
    """A timer due at once (201); an existing key is kept as it is (200)."""
    data = await read_json(request, service_of(request).settings.body_limit)
    fields = dict(EVENT_BODY.read(data))
    event_type = fields.pop("type")
    payload = fields.pop("payload", None)
    result = await app.emit(event_type, payload, **fields)
    await app.audit.record_put(operator_of(request), "emit", result)
    return await _put_answer(request, app, result)


@router.get(
    "/dead",
    summary="The dead-letter queue, newest first",
    response_model=TimerPageOut,
    responses=errors(401, 404, 422),
)
async def list_dead(
    app: ReadApp, service: ServiceDep, cursor: Cursor = None, limit: Limit = 50
) -> Response:
    return await _page(service, app, await app.timers.dead(cursor=cursor, limit=limit))


class DeadTypeOut(BaseModel):
    type: str
    count: int
    newest_at: str | None = Field(description="When the newest of them died")
    newest_error: str | None = Field(description="The newest one's last error")


class DeadTypesOut(BaseModel):
    """Most dead letters first."""

    items: list[DeadTypeOut]


@router.get(
    "/dead/types",
    summary="The dead-letter queue by event type",
    response_model=DeadTypesOut,
    responses=errors(401, 404, 422),
)
async def dead_types(
    app: ReadApp, limit: Annotated[int, Query(ge=1, le=1000, description="Types")] = 20
) -> JSONResponse:
    """What broke and how much of it: each type's count, and its newest dead letter's error."""
    items = await app.timers.dead_types(limit)
    return JSONResponse({"items": [item.to_dict() for item in items]})


@router.post(
    "/dead/{key:path}/replay",
    summary="Send a dead timer round again",
    response_model=ChangedOut,
    responses=errors(401, 403, 404, 409, 422),
)
async def replay_dead(
    request: Request, app: WriteApp, key: Key, service: ServiceDep
) -> JSONResponse:
    """Due now, with a fresh set of attempts; 409 unless the timer is dead."""
    timer = await app.timers.replay(key, actor=actor_of(request))
    return JSONResponse({"action": "replayed", "timer": await shown(service, app, timer)})


@router.get(
    "/stats",
    summary="Counts by status, the next due timers and the lateness histogram",
    response_model=StatsOut,
    responses=errors(401, 404, 422),
)
async def stats(
    app: ReadApp,
    service: ServiceDep,
    counts: Annotated[
        bool, Query(description="false: leave the counts out (`…/counts` answers them alone)")
    ] = True,
) -> JSONResponse:
    """``unsubscribed``: the pending timers no live node would deliver, by type, most first.
    Counting reads every timer of the namespace; with ``counts=false`` the rest answers at
    once."""
    by_status = await app.timers.counts() if counts else {}
    next_due = await compat.upcoming(app, service.settings.upcoming_limit)
    found = await service.subscribers(app.namespace)
    waiting = await app.events.unsubscribed(UNSUBSCRIBED_TYPES, subscribers=found)
    return JSONResponse(
        {
            "namespace": app.namespace,
            "counts": {status.value: count for status, count in by_status.items()},
            "next_due": [found.shown(timer) for timer in next_due],
            "unsubscribed": [{"type": type, "count": count} for type, count in waiting],
            "lateness": service.metrics.lateness_summary(app.namespace),
        }
    )


@router.get(
    "/counts",
    summary="Timers by status",
    response_model=CountsOut,
    responses=errors(401, 404),
)
async def counts(app: ReadApp) -> JSONResponse:
    """Exact, and the slowest read of the overview on a large namespace (every timer is
    counted): asked apart from the lists, which then never wait for it."""
    by_status = await app.timers.counts()
    return JSONResponse(
        {
            "namespace": app.namespace,
            "counts": {status.value: count for status, count in by_status.items()},
        }
    )
