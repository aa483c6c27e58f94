"""``/v1/namespaces/{namespace}/schedules``: define, list, show, change, pause, resume, delete.

Bodies go through :class:`ScheduleRequest` and the facade, so a REST request is validated exactly
like a Python ``add_schedule(...)`` call, and bad input stores nothing. ``GET /v1/preview`` shows
the next occurrences of a rule without storing anything.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Any, cast

from fastapi import APIRouter, Path, Query, Request

from duetime.api.deps import (
    PrincipalDep,
    ReadApp,
    ServiceDep,
    WriteApp,
    actor_of,
    read_json,
)
from duetime.api.responses import JSONResponse
from duetime.api.schedule_schemas import (
    Feb29Name,
    OnGapName,
    OnOverlapName,
    PreviewOut,
    RollName,
    ScheduleChangedOut,
    ScheduleDeletedOut,
    ScheduleDetailOut,
    SchedulePageOut,
    SchedulePutOut,
)
from duetime.api.schemas import CURSOR, ErrorOut, errors, json_body
from duetime.bodies import Body
from duetime.errors import InvalidInput
from duetime.formats import CRON_PATTERN, EVERY_PATTERN, INSTANT_PATTERN, TYPE_PATTERN, timezones
from duetime.model import JSON, OnConflict, Schedule, iso
from duetime.model.cursors import NAME_CURSOR_PATTERN
from duetime.schedule_bodies import (
    ON_CONFLICT,
    SCHEDULE_NAME_PATTERN,
    SCHEDULE_PATCH_BODY,
    SCHEDULE_PUT_BODY,
)
from duetime.schedules import ScheduleRequest, recurrence_of
from duetime.support.cpu_work import run_cpu_work
from duetime.timemath.recurrence import describe, parse_recurrence
from duetime.timemath.tzmath import load_zone

router = APIRouter(prefix="/v1/namespaces/{namespace}", tags=["schedules"])
preview_router = APIRouter(tags=["schedules"])

PREVIEW = 5
Name = Annotated[
    str,
    Path(
        min_length=1,
        max_length=200,
        pattern=SCHEDULE_NAME_PATTERN,
        description="The schedule's name",
    ),
]
Count = Annotated[int, Query(ge=1, le=1000, description="How many occurrences")]
Limit = Annotated[int, Query(ge=1, le=1000, description="Page size")]
Cursor = Annotated[str | None, Query(description=CURSOR, pattern=NAME_CURSOR_PATTERN)]
EXISTS: dict[int | str, dict[str, Any]] = {
    409: {"model": ErrorOut, "description": "A schedule of that name exists"}
}
RACED: dict[int | str, dict[str, Any]] = {
    409: {"model": ErrorOut, "description": "Others kept changing the schedule; try again"}
}


def _answer(action: str, schedule: Schedule, status: int = 200) -> JSONResponse:
    return JSONResponse({"action": action, "schedule": schedule.to_dict()}, status)


def occurrences_json(instants: Sequence[datetime], timezone: str) -> list[JSON]:
    """Each instant in UTC and as wall-clock time with its offset in ``timezone``."""
    zone = load_zone(timezone)
    return [
        {"utc": iso(instant), "local": instant.astimezone(zone).isoformat()} for instant in instants
    ]


async def _body(request: Request, service: ServiceDep, body: Body) -> dict[str, Any]:
    return body.read(await read_json(request, service.settings.body_limit))


@router.post(
    "/schedules",
    summary="Define a schedule",
    status_code=201,
    response_model=SchedulePutOut,
    responses=errors(
        400,
        401,
        403,
        404,
        413,
        422,
        extra={**EXISTS, 200: {"model": SchedulePutOut, "description": "Updated or kept"}},
    ),
    openapi_extra=json_body(SCHEDULE_PUT_BODY),
)
async def add_schedule(request: Request, app: WriteApp, service: ServiceDep) -> JSONResponse:
    """Create (201), or bring an existing name to this definition (200); `action` says which.

    Without `active`, a new schedule starts active and an existing one stays paused or running.
    """
    data = dict(await _body(request, service, SCHEDULE_PUT_BODY))
    on_conflict = data.pop("on_conflict", "update")
    if not isinstance(on_conflict, str) or on_conflict not in ON_CONFLICT:
        raise InvalidInput("on_conflict", f"must be one of {', '.join(ON_CONFLICT)}")
    active = data.pop("active", None)
    if active is not None and not isinstance(active, bool):
        raise InvalidInput("active", "must be true or false")
    schedule_request = ScheduleRequest(**data, active=active is not False)
    ((action, schedule),) = await app.schedules.add_many(
        [schedule_request],
        on_conflict=cast(OnConflict, on_conflict),
        keep_active=active is None,
        actor=actor_of(request),
    )
    return _answer(action, schedule, 201 if action == "created" else 200)


@router.get(
    "/schedules",
    summary="List schedules by name",
    response_model=SchedulePageOut,
    responses=errors(401, 404, 422),
)
async def list_schedules(
    app: ReadApp,
    subject: Annotated[
        str | None, Query(description="Only schedules about this subject", min_length=1)
    ] = None,
    type: Annotated[
        str | None,
        Query(description="Only this event type", pattern=TYPE_PATTERN, max_length=200),
    ] = None,
    active: Annotated[bool | None, Query(description="Only running (true) / paused")] = None,
    cursor: Cursor = None,
    limit: Limit = 50,
) -> JSONResponse:
    page = await app.schedules.list(
        subject=subject, type=type, active=active, cursor=cursor, limit=limit
    )
    return JSONResponse(
        {"items": [s.to_dict() for s in page.items], "next_cursor": page.next_cursor}
    )


@router.get(
    "/schedules/{name}",
    summary="One schedule and its next occurrences",
    response_model=ScheduleDetailOut,
    responses=errors(401, 404, 422),
)
async def show_schedule(app: ReadApp, name: Name, count: Count = PREVIEW) -> JSONResponse:
    """`next` lists the coming occurrences in UTC and local time (empty while paused)."""
    schedule = await app.schedules.get(name)
    upcoming = await app.schedules.preview(schedule=name, count=count) if schedule.active else []
    return JSONResponse(
        {
            "schedule": schedule.to_dict(),
            "description": describe(recurrence_of(schedule)),
            "next": occurrences_json(upcoming, schedule.timezone),
        }
    )


@router.patch(
    "/schedules/{name}",
    summary="Change some fields of a schedule",
    response_model=ScheduleChangedOut,
    responses=errors(400, 401, 403, 404, 413, 422, extra=RACED),
    openapi_extra=json_body(SCHEDULE_PATCH_BODY),
)
async def update_schedule(
    request: Request, app: WriteApp, name: Name, service: ServiceDep
) -> JSONResponse:
    """The next occurrence is recomputed; `action` is `kept` when nothing changed.

    A change of the rule (cron, every, timezone, start/end, DST options) starts afresh from now.
    """
    data = await _body(request, service, SCHEDULE_PATCH_BODY)
    if not data:
        raise InvalidInput("body", "nothing to change: give at least one field")
    before = await app.schedules.get(name)
    schedule = await app.schedules.update(name, **data, actor=actor_of(request))
    return _answer("kept" if schedule.version == before.version else "updated", schedule)


@router.post(
    "/schedules/{name}/pause",
    summary="Pause a schedule",
    response_model=ScheduleChangedOut,
    responses=errors(401, 403, 404, 422, extra=RACED),
)
async def pause_schedule(request: Request, app: WriteApp, name: Name) -> JSONResponse:
    """No occurrences until resumed; those made ahead of time are withdrawn."""
    return _answer("paused", await app.schedules.pause(name, actor=actor_of(request)))


@router.post(
    "/schedules/{name}/resume",
    summary="Resume a paused schedule",
    response_model=ScheduleChangedOut,
    responses=errors(401, 403, 404, 422, extra=RACED),
)
async def resume_schedule(request: Request, app: WriteApp, name: Name) -> JSONResponse:
    """From the next occurrence after now: the paused time is not caught up."""
    return _answer("resumed", await app.schedules.resume(name, actor=actor_of(request)))


@router.delete(
    "/schedules/{name}",
    summary="Delete a schedule",
    response_model=ScheduleDeletedOut,
    responses=errors(401, 403, 404, 422),
)
async def delete_schedule(request: Request, app: WriteApp, name: Name) -> JSONResponse:
    """Its pending occurrences are cancelled (`cancelled` says how many); history stays."""
    schedule, cancelled = await app.schedules.delete(name, actor=actor_of(request))
    return JSONResponse(
        {"action": "deleted", "schedule": schedule.to_dict(), "cancelled": cancelled}
    )


RULE_PARAMETER: dict[str, Any] = {
    "name": "rule",
    "in": "query",
    "required": True,
    "style": "form",
    "explode": True,
    "description": (
        "Exactly one of `cron`, `every` or `rrule`, each a query parameter of its own"
        " (`?cron=30%202%20*%20*%20*`)"
    ),
    "schema": {
        "type": "object",
        "properties": {
            # The cron pattern is documented, not enforced: the parser answers
            # `invalid_cron` naming the field.
            "cron": {"type": "string", "pattern": CRON_PATTERN, "examples": ["30 2 * * *"]},
            "every": {
                "type": "string",
                "pattern": EVERY_PATTERN,
                "description": "An interval: PT5M or seconds",
            },
            "rrule": {
                "type": "string",
                "minLength": 1,
                "examples": ["FREQ=MONTHLY;BYMONTHDAY=15,-1"],
            },
        },
        "additionalProperties": False,
        "oneOf": [{"required": [kind]} for kind in ("cron", "every", "rrule")],
    },
}
"""The rule of a preview: the three query parameters as one object, so that the document can
say that exactly one is given (a schema relates properties of one value, never two
parameters); exploded, it is the same query string."""


@preview_router.get(
    "/v1/preview",
    summary="The next occurrences of a cron, interval or RFC 5545 rule",
    response_model=PreviewOut,
    responses=errors(401, 422),
    openapi_extra={"parameters": [RULE_PARAMETER]},
)
async def preview(
    service: ServiceDep,
    who: PrincipalDep,
    cron: Annotated[str | None, Query(include_in_schema=False)] = None,
    every: Annotated[str | None, Query(include_in_schema=False, pattern=EVERY_PATTERN)] = None,
    timezone: Annotated[
        str, Query(examples=["America/New_York"], json_schema_extra={"enum": timezones()})
    ] = "UTC",
    after: Annotated[
        str | None, Query(description="ISO 8601 instant [now]", pattern=INSTANT_PATTERN)
    ] = None,
    start_at: Annotated[str | None, Query(pattern=INSTANT_PATTERN)] = None,
    end_at: Annotated[str | None, Query(pattern=INSTANT_PATTERN)] = None,
    on_gap: OnGapName = "run_after",
    on_overlap: OnOverlapName = "once",
    count: Count = PREVIEW,
    rrule: Annotated[str | None, Query(include_in_schema=False, min_length=1)] = None,
    dtstart: Annotated[
        str | None, Query(min_length=1, description="With rrule: local time")
    ] = None,
    exdate: Annotated[list[str] | None, Query(description="Local time to skip")] = None,
    rdate: Annotated[list[str] | None, Query(description="Local time to add")] = None,
    holidays: Annotated[str | None, Query(min_length=1, examples=["DE-BE"])] = None,
    roll: RollName | None = None,
    feb29: Feb29Name = "feb28",
) -> JSONResponse:
    """Nothing is stored: try a rule (and its DST behaviour) before defining a schedule: exactly
    one of `cron`, `every` or `rrule` (documented as the one object `rule`, whose properties
    are the query parameters). An `rrule` without `after` lists from its `dtstart` on."""
    calendar = ScheduleRequest(
        name="preview",
        type="preview",
        rrule=rrule,
        dtstart=dtstart,
        exdates=exdate,
        rdates=rdate,
        holidays=holidays,
        roll=roll,
        feb29=feb29,
    ).calendar_options()
    upcoming = await service.root.schedules.preview(
        cron,
        every=every,
        timezone=timezone,
        on_gap=on_gap,
        on_overlap=on_overlap,
        start_at=start_at,
        end_at=end_at,
        after=after,
        count=count,
        rrule=rrule,
        dtstart=dtstart,
        exdates=exdate,
        rdates=rdate,
        holidays=holidays,
        roll=roll,
        feb29=feb29,
    )
    rule = await run_cpu_work(
        functools.partial(
            parse_recurrence,
            cron=cron,
            every=every,
            timezone=timezone,
            on_gap=on_gap,
            on_overlap=on_overlap,
            rrule=rrule,
            calendar=calendar,
        )
    )
    return JSONResponse(
        {
            "timezone": timezone,
            "description": describe(rule),
            "occurrences": occurrences_json(upcoming, timezone),
        }
    )


__all__ = ["preview_router", "router"]
