"""``/v1/namespaces/{namespace}/…``: what an operator does to timers — run one now, or cancel,
replay, run now or delete every timer a filter (or a selection of keys) takes, after seeing how
many that is. Each action is written to the audit log with the token that asked for it.

A bulk action goes through :meth:`AsyncApp.bulk`: set-based SQL, in batches of a thousand rows
each in its own transaction, so acting on 100,000 timers never holds their locks at once.
"""

from __future__ import annotations

from typing import Any, get_args

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from duetime.api.deps import ServiceDep, WriteApp, actor_of, read_json
from duetime.api.responses import JSONResponse
from duetime.api.schemas import (
    MAX_PAYLOAD_QUERY_LENGTH,
    PAYLOAD_DESCRIPTION,
    TYPE_GLOB_PATTERN,
    WHEN,
    ChangedOut,
    StatusName,
    TypePattern,
    errors,
    json_body,
)
from duetime.api.timers import Key, shown
from duetime.bodies import Body, BodyField, Schema
from duetime.errors import InvalidInput
from duetime.formats import PAYLOAD_MATCH_PATTERN, WHEN_PATTERN
from duetime.model import BULK_ACTIONS, MAX_BULK_KEYS, BulkAction
from duetime.model.finding import MAX_SELECTED_KEYS
from duetime.requests import IDENTIFIER
from duetime.schedule_bodies import SCHEDULE_NAME_PATTERN
from duetime.timer_filters import check_action, selected_keys, timer_filter
from duetime.validation import MAX_STORED_KEY_LENGTH, MAX_SUBJECT_LENGTH, check_keys

router = APIRouter(prefix="/v1/namespaces/{namespace}", tags=["timers"])


def _or_empty(pattern: str) -> str:
    """``pattern`` (anchored), or the empty text: an empty field narrows nothing."""
    return f"^(?:{pattern.removeprefix('^').removesuffix('$')})?$"


_SELECTED_KEY = {"type": "string", "maxLength": MAX_STORED_KEY_LENGTH, "pattern": IDENTIFIER}
"""A timer's key in a selection: as stored keys are, never empty."""


def _keys(most: int) -> Schema:
    return {"type": "array", "items": _SELECTED_KEY, "minItems": 1, "maxItems": most}


def _text(pattern: str, **more: Any) -> Schema:
    return {"type": "string", "pattern": pattern, **more}


FILTER_BODY = Body(
    "FilterIn",
    "Which timers: every field narrows it, as in ``GET …/timers`` (empty or null: not).",
    (
        BodyField("subject", _text(_or_empty(IDENTIFIER), maxLength=MAX_SUBJECT_LENGTH)),
        BodyField("status", {"type": "string", "enum": list(get_args(StatusName))}),
        BodyField(
            "type", _text(_or_empty(TYPE_GLOB_PATTERN), maxLength=200), description=TypePattern
        ),
        BodyField("due_from", _text(_or_empty(WHEN_PATTERN)), f"Due at or after: {WHEN}"),
        BodyField("due_until", _text(_or_empty(WHEN_PATTERN)), f"Due before: {WHEN}"),
        BodyField(
            "payload",
            _text(PAYLOAD_MATCH_PATTERN, maxLength=MAX_PAYLOAD_QUERY_LENGTH),
            PAYLOAD_DESCRIPTION,
        ),
        BodyField(
            "keys", _keys(MAX_SELECTED_KEYS), "Only these timers: a selection made row by row"
        ),
        BodyField(
            "schedule",
            _text(_or_empty(SCHEDULE_NAME_PATTERN), maxLength=200),
            "Only the occurrences of this schedule (its name)",
        ),
    ),
)
"""A bulk action's ``filter``: each field a string (or null), as the listing's query takes."""

BULK_BODY = Body(
    "BulkIn",
    "``cancel`` takes scheduled and retrying timers, ``replay`` dead ones, ``run_now``"
    " scheduled and retrying ones not due yet, ``delete`` finished ones (done, dead, cancelled,"
    " expired: with their attempts and history); other timers it is given are left alone.",
    (
        BodyField(
            "action",
            {"type": "string", "enum": list(BULK_ACTIONS)},
            required=True,
            missing=f"must be one of {', '.join(BULK_ACTIONS)}",
        ),
        BodyField(
            "filter",
            lambda: {k: v for k, v in FILTER_BODY.json_schema().items() if k != "description"},
            "Absent: every timer",
            default={},
        ),
        BodyField(
            "keys",
            _keys(MAX_BULK_KEYS),
            "Only the timers with these keys (a selection); the filter narrows them",
        ),
        BodyField(
            "dry_run", {"type": "boolean"}, "Only count the timers it would take", default=False
        ),
    ),
)
"""``POST …/timers/bulk``: read by :func:`bulk`, shown by /openapi.json."""


class BulkOut(BaseModel):
    action: BulkAction
    dry_run: bool
    count: int = Field(description="Timers changed (with dry_run: that would be taken now)")


@router.post(
    "/timers/{key:path}/run-now",
    summary="Make a pending timer due now (retry now)",
    response_model=ChangedOut,
    responses=errors(401, 403, 404, 409, 422),
)
async def run_now(request: Request, app: WriteApp, key: Key, service: ServiceDep) -> JSONResponse:
    """A scheduled or retrying timer becomes due at once; 409 for any other status."""
    timer = await app.timers.run_now(key, actor=actor_of(request))
    return JSONResponse({"action": "made_due", "timer": await shown(service, app, timer)})


@router.post(
    "/timers/bulk",
    summary="Cancel, replay, run now or delete every timer a filter or a selection takes",
    response_model=BulkOut,
    responses=errors(400, 401, 403, 404, 413, 422),
    openapi_extra=json_body(BULK_BODY),
)
async def bulk(request: Request, app: WriteApp, service: ServiceDep) -> JSONResponse:
    """Send ``dry_run: true`` first to learn how many timers match (the dashboard asks the
    operator to confirm that number), then the same body without it to act."""
    data = await read_json(request, service.settings.body_limit)
    BULK_BODY.read(data)
    action = check_action(data.get("action"))
    dry_run = data.get("dry_run", False)
    if not isinstance(dry_run, bool):
        raise InvalidInput("dry_run", "must be true or false")
    found = timer_filter(**_filter_fields(data.get("filter", {})), now=app.clock.now())
    keys = None if data.get("keys") is None else check_keys(data["keys"])
    count = await app.timers.bulk(
        action, found, keys=keys, dry_run=dry_run, actor=actor_of(request)
    )
    return JSONResponse({"action": action, "dry_run": dry_run, "count": count})


def _filter_fields(value: object) -> dict[str, Any]:
    """The filter object's fields, each a string (or null); InvalidInput names a bad one."""
    given = FILTER_BODY.read(value, "filter.")
    for name, field in given.items():
        if name == "keys":
            if field is not None:
                selected_keys(field, "filter.keys")
        elif field is not None and not isinstance(field, str):
            raise InvalidInput(f"filter.{name}", "must be a string")
    return {name: field for name, field in given.items() if field not in (None, "")}
