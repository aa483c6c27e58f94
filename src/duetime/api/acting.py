"""``/v1/namespaces/{namespace}/…``: acting on what the console shows — edit a pending timer's
due time or payload (a re-schedule of its key with ``on_conflict=update``), and run a schedule's
next occurrence now (once: the schedule goes on from the occurrence after it)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from duetime.api.deps import ServiceDep, WriteApp, actor_of, read_json
from duetime.api.responses import JSONResponse
from duetime.api.schedules import Name
from duetime.api.schemas import (
    ChangedOut,
    PutOut,
    errors,
    json_body,
)
from duetime.api.timers import Key
from duetime.errors import InvalidInput
from duetime.requests import EDIT_BODY

router = APIRouter(prefix="/v1/namespaces/{namespace}", tags=["timers"])


@router.patch(
    "/timers/{key:path}",
    summary="Edit a pending timer's due time or payload",
    response_model=PutOut,
    responses=errors(400, 401, 403, 404, 409, 413, 422),
    openapi_extra=json_body(EDIT_BODY),
)
async def edit_timer(
    request: Request, app: WriteApp, key: Key, service: ServiceDep
) -> JSONResponse:
    """The same rules as ``POST …/timers`` with the same key and ``on_conflict=update``: 409
    once the timer has fired (or is a delivery of an event)."""
    data = await read_json(request, service.settings.body_limit)
    if not isinstance(data, dict):
        raise InvalidInput("body", "must be a JSON object")
    timer = await app.timers.edit(key, data, actor=actor_of(request))
    return JSONResponse({"action": "updated", "timer": timer.to_dict()})


@router.post(
    "/schedules/{name}/run-next",
    summary="Run a schedule's next occurrence now",
    response_model=ChangedOut,
    responses=errors(401, 403, 404, 409, 422),
)
async def run_next(request: Request, app: WriteApp, name: Name) -> JSONResponse:
    """Its timer is created (the occurrence's usual key) and due now; the schedule moves on to
    the occurrence after it, so nothing fires again at its instant. 409 when the schedule is
    paused or has no next occurrence."""
    timer = await app.schedules.run_next_now(name, actor=actor_of(request))
    return JSONResponse({"action": "made_due", "timer": timer.to_dict()})
