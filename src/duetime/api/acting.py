"""``/v1/namespaces/{namespace}/…``: acting on what the console shows — edit a pending timer's
due time or payload (a re-schedule of its key with ``on_conflict=update``), and run a schedule's
next occurrence now (once: the schedule goes on from the occurrence after it)."""

from __future__ import annotations

from itertools import combinations
from typing import Annotated, Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from duetime.api.deps import ServiceDep, WriteApp, actor_of, read_json
from duetime.api.responses import JSONResponse
from duetime.api.schedules import Name
from duetime.api.schemas import (
    ChangedOut,
    PutOut,
    Seconds,
    errors,
    json_body,
    zone_field,
)
from duetime.api.timers import Key
from duetime.errors import InvalidInput
from duetime.formats import DATE_PATTERN, DURATION_PATTERN, INSTANT_PATTERN, LOCAL_PATTERN
from duetime.requests import WHEN_FORMS
from duetime.timemath.tzmath import Disambiguation

router = APIRouter(prefix="/v1/namespaces/{namespace}", tags=["timers"])


def _edit_schema(schema: dict[str, Any]) -> None:
    """What pydantic cannot say: something to change, at most one form of "when" (``local``
    with its zone), the zone names; a field given is not null (only ``payload`` may be)."""
    schema["minProperties"] = 1
    schema["not"] = {"anyOf": [{"required": list(pair)} for pair in combinations(WHEN_FORMS, 2)]}
    schema["dependentRequired"] = {"local": ["timezone"]}
    properties = schema["properties"]
    zone = properties["timezone"]
    properties["timezone"] = {
        **{k: zone[k] for k in ("description", "title") if k in zone},
        **zone_field(),
    }
    for name, prop in properties.items():
        prop.pop("default", None)
        options = prop.pop("anyOf", None)
        if options is not None and name != "payload":
            values = [option for option in options if option.get("type") != "null"]
            prop.update(values[0] if len(values) == 1 else {"anyOf": values})


class EditIn(BaseModel):
    """At most one of ``at``, ``delay``, ``local`` or ``date`` (with ``timezone``) and/or a new
    ``payload``; the timer's other fields stay."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_edit_schema)

    at: str | None = Field(None, examples=["2025-03-15T13:00:00Z"], pattern=INSTANT_PATTERN)
    delay: Annotated[str, Field(pattern=DURATION_PATTERN)] | Seconds | None = Field(
        None, examples=["PT2H", 90]
    )
    local: str | None = Field(None, examples=["2025-03-15T09:00"], pattern=LOCAL_PATTERN)
    date: str | None = Field(None, examples=["2025-03-15"], pattern=DATE_PATTERN)
    timezone: str | None = Field(None, description="The zone of local (or of the timer's own)")
    disambiguation: Disambiguation = "compatible"
    payload: Any = Field(
        None,
        description="Any JSON with no NUL character (\\u0000) in its strings or keys: "
        "replaces the payload",
    )


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
    timer = await app.edit(key, data, actor=actor_of(request))
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
    timer = await app.run_next_now(name, actor=actor_of(request))
    return JSONResponse({"action": "made_due", "timer": timer.to_dict()})
