"""``GET /v1/namespaces/{namespace}/events``: the event log, by type and time, newest first.

(``POST`` on the same path emits an event: see :mod:`duetime.api.timers`.) The query goes
through :meth:`AsyncApp.events`, so ``type``, ``since`` and ``until`` are read exactly as in
Python and on the command line, and bad ones are a 422 naming the parameter.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field
from starlette.responses import Response

from duetime.api.deps import ReadApp, ServiceDep
from duetime.api.pages import page_response
from duetime.api.responses import JSONResponse
from duetime.api.schemas import (
    CURSOR,
    TYPE_GLOB_PATTERN,
    WHEN,
    AttemptOut,
    TimerOut,
    TypePattern,
    errors,
)
from duetime.event_filters import MAX_ACTIVITY_MINUTES
from duetime.formats import WHEN_PATTERN
from duetime.model.cursors import EVENT_CURSOR_PATTERN
from duetime.model.history import LoggedEvent

router = APIRouter(prefix="/v1/namespaces/{namespace}", tags=["events"])


class EventOut(TimerOut):
    """A timer that fired, with every attempt at delivering it so far, oldest first."""

    deliveries: list[AttemptOut]


class EventPageOut(BaseModel):
    """Newest ``fired_at`` first; pass ``next_cursor`` as ``cursor`` for the next page."""

    items: list[EventOut]
    next_cursor: str | None = Field(description="null on the last page")


@router.get(
    "/events",
    summary="The event log: what fired, newest first, with its deliveries",
    response_model=EventPageOut,
    responses=errors(401, 404, 422),
)
async def list_events(
    app: ReadApp,
    service: ServiceDep,
    type: Annotated[
        str | None,
        Query(
            description=TypePattern,
            pattern=TYPE_GLOB_PATTERN,
            max_length=200,
        ),
    ] = None,
    since: Annotated[
        str | None, Query(description=f"Fired at or after: {WHEN}", pattern=WHEN_PATTERN)
    ] = None,
    until: Annotated[
        str | None, Query(description=f"Fired before: {WHEN}", pattern=WHEN_PATTERN)
    ] = None,
    cursor: Annotated[str | None, Query(description=CURSOR, pattern=EVENT_CURSOR_PATTERN)] = None,
    limit: Annotated[int, Query(ge=1, le=1000, description="Page size")] = 50,
) -> Response:
    """Timers that fired (events emitted now and timers that came due), archived ones too,
    until the retention deletes them."""
    page = await app.events.log(type=type, since=since, until=until, cursor=cursor, limit=limit)
    return await page_response(page, LoggedEvent.to_dict, service.settings.core.page_bytes)


class ActivityMinuteOut(BaseModel):
    start: str = Field(description="The minute's first instant (UTC)")
    fired: int = Field(description="Timers that fired (first attempt started) in this minute")
    by_status: dict[str, int] = Field(description="Those timers by their status now")
    lateness_mean_ms: float | None = Field(description="Mean of fired_at - due_at; null if none")
    lateness_max_ms: float | None


class ActivityOut(BaseModel):
    """Oldest minute first, the current (partial) minute last."""

    minutes: list[ActivityMinuteOut]


@router.get(
    "/activity",
    summary="Throughput and lateness per minute, from the database",
    response_model=ActivityOut,
    responses=errors(401, 404, 422),
)
async def activity(
    app: ReadApp,
    minutes: Annotated[int, Query(ge=1, le=MAX_ACTIVITY_MINUTES, description="Window")] = 60,
) -> JSONResponse:
    """Read from the timers every node has worked (the event log's index), not from this
    server's memory: what the dashboard's charts draw."""
    series = await app.events.activity(minutes)
    return JSONResponse({"minutes": [minute.to_dict() for minute in series]})
