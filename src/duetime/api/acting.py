"""``/v1/namespaces/{namespace}/…``: acting on what the console shows — edit a pending timer's
due time or payload (a re-schedule of its key with ``on_conflict=update``), and run a schedule's
next occurrence now (once: the schedule goes on from the occurrence after it)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from duetime.api.deps import ServiceDep, WriteApp, read_json
from duetime.api.responses import JSONResponse
from duetime.api.schedules import Name
from duetime.api.schemas import ChangedOut, PutOut, errors, json_body
from duetime.api.timers import Key
from duetime.errors import InvalidInput

router = APIRouter(prefix="/v1/namespaces/{namespace}", tags=["timers"])


class EditIn(BaseModel):
    """At most one of ``at``, ``delay``, ``local`` or ``date`` (with ``timezone``) and/or a new
    ``payload``; the timer's other fields stay."""

    model_config = ConfigDict(extra="forbid")

    at: str | None = Field(None, examples=["2025-03-15T13:00:00Z"])
    delay: str | float | None = Field(None, examples=["PT2H"])
    local: str | None = Field(None, examples=["2025-03-15T09:00"])
    date: str | None = None
    timezone: str | None = None
    disambiguation: str | None = None
    payload: Any = Field(None, description="Any JSON: replaces the payload")


@router.patch(
    "/timers/{key:path}",
    summary="Edit a pending timer's due time or payload",
    response_model=PutOut,
    responses=errors(400, 401, 403, 404, 409, 413, 422),
    openapi_extra=json_body(EditIn),
)
async def edit_timer(
    request: Request, app: WriteApp, key: Key, service: ServiceDep
) -> JSONResponse:
    """The same rules as ``POST …/timers`` with the same key and ``on_conflict=update``: 409
    once the timer has fired (or is a delivery of an event)."""
    data = await read_json(request, service.settings.body_limit)
    if not isinstance(data, dict):
        raise InvalidInput("body", "must be a JSON object")
    timer = await app.edit(key, data)
    return JSONResponse({"action": "updated", "timer": timer.to_dict()})


@router.post(
    "/schedules/{name}/run-next",
    summary="Run a schedule's next occurrence now",
    response_model=ChangedOut,
    responses=errors(401, 403, 404, 409, 422),
)
async def run_next(app: WriteApp, name: Name) -> JSONResponse:
    """Its timer is created (the occurrence's usual key) and due now; the schedule moves on to
    the occurrence after it, so nothing fires again at its instant. 409 when the schedule is
    paused or has no next occurrence."""
    timer = await app.run_next_now(name)
    return JSONResponse({"action": "made_due", "timer": timer.to_dict()})
