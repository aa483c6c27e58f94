"""``POST /v1/namespaces/{namespace}/schedules/{name}/backfill``: the occurrences a schedule
would have had in a past range, made as timers (or listed, ``dry_run``)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import BaseModel

from duetime.api.deps import ServiceDep, WriteApp, actor_of, read_json
from duetime.api.responses import JSONResponse
from duetime.api.schedules import Name
from duetime.api.schemas import errors, json_body
from duetime.bodies import Body, BodyField
from duetime.formats import INSTANT_PATTERN

router = APIRouter(prefix="/v1/namespaces/{namespace}", tags=["schedules"])

BACKFILL_BODY = Body(
    "BackfillIn",
    "A past range, both ends included; at most 10,000 occurrences unless ``yes``.",
    (
        BodyField(
            "from",
            {"type": "string", "pattern": INSTANT_PATTERN},
            "The range's first instant",
            ("2025-03-01T00:00:00Z",),
            required=True,
        ),
        BodyField(
            "to",
            {"type": "string", "pattern": INSTANT_PATTERN},
            "The range's last instant, not after now (the database's clock)",
            ("2025-03-08T00:00:00Z",),
            required=True,
        ),
        BodyField("dry_run", {"type": "boolean"}, "List the occurrences, write nothing"),
        BodyField("yes", {"type": "boolean"}, "Confirm a range of over 10,000 occurrences"),
    ),
)


class BackfillOccurrenceOut(BaseModel):
    due_at: str
    key: str
    existed: bool


class BackfillOut(BaseModel):
    """``existed``: a timer held the occurrence's key already (kept as it was)."""

    schedule: str
    dry_run: bool
    count: int
    created: int
    existing: int
    occurrences: list[BackfillOccurrenceOut]


@router.post(
    "/schedules/{name}/backfill",
    summary="Backfill a schedule's occurrences over a past range",
    response_model=BackfillOut,
    responses=errors(400, 401, 403, 404, 413, 422),
    openapi_extra=json_body(BACKFILL_BODY),
)
async def backfill(
    request: Request, app: WriteApp, name: Name, service: ServiceDep
) -> JSONResponse:
    """Each occurrence keyed by its nominal instant, as the materialiser keys it: a key stored
    already is kept (a backfill twice creates nothing twice; what ran is not repeated). The
    timers are due at once and flow control paces them as any due timer."""
    data = BACKFILL_BODY.read(await read_json(request, service.settings.body_limit))
    report = await app.schedules.backfill(
        name,
        from_=data["from"],
        to=data["to"],
        dry_run=bool(data.get("dry_run")),
        yes=bool(data.get("yes")),
        actor=actor_of(request),
    )
    return JSONResponse(report.to_dict())
