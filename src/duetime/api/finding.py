"""``GET /v1/namespaces/{namespace}/types``: the event types a namespace knows, by prefix — what
the console suggests while an operator types a type into a filter or a form."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel

from duetime.api.deps import ReadApp
from duetime.api.responses import JSONResponse
from duetime.api.schemas import errors

router = APIRouter(prefix="/v1/namespaces/{namespace}", tags=["timers"])


class TypesOut(BaseModel):
    """Alphabetical."""

    items: list[str]


@router.get(
    "/types",
    summary="Known event types starting with a prefix",
    response_model=TypesOut,
    responses=errors(401, 404, 422),
)
async def list_types(
    app: ReadApp,
    prefix: Annotated[str, Query(max_length=200, description="The start of the type")] = "",
    limit: Annotated[int, Query(ge=1, le=100, description="Types at most")] = 20,
) -> JSONResponse:
    """The types of the namespace's schedules and of its newest 10,000 timers: a bounded
    read, cheap enough to ask at every keystroke."""
    return JSONResponse({"items": await app.events.types(prefix, limit)})
