"""``GET /v1/namespaces/{namespace}/audit``: who did what, newest first.

Every operator action through the API, the console, the CLI and the Python facade — each
state-changing operation (docs/audit.md lists them) — with who made it (``token:<name>``,
``api:anonymous`` without auth, ``cli:<user>@<host>``, ``python:<name>``), when, what it took
and how many. A token sees the log of the namespaces it may read, and only theirs.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field
from starlette.responses import Response

from duetime.api.deps import ReadApp, ServiceDep
from duetime.api.pages import page_response
from duetime.api.schemas import CURSOR, errors
from duetime.model.audit import AuditEntry
from duetime.model.cursors import AUDIT_CURSOR_PATTERN

router = APIRouter(prefix="/v1/namespaces/{namespace}", tags=["audit"])


class AuditEntryOut(BaseModel):
    id: int
    namespace: str
    at: str = Field(description="When the action was done (UTC)")
    actor: str = Field(
        description="`token:<name>` (`token:#<id>` if unnamed), `api:anonymous` (auth off), "
        "`cli:<user>@<host>`, `python` or `python:<name>`"
    )
    via: str = Field(description="`api`, `console` (the dashboard), `cli` or `python`")
    action: str = Field(description="cancel, run_now, replay, delete, edit, bulk_<action>, …")
    target: dict[str, Any] = Field(
        description="What it took: key, keys, filter, pattern, schedule…; a long key list as "
        "its count and sha256"
    )
    count: int = Field(description="How many it changed")


class AuditPageOut(BaseModel):
    """Newest first; pass ``next_cursor`` as ``cursor`` for the next page."""

    items: list[AuditEntryOut]
    next_cursor: str | None = Field(description="null on the last page")


@router.get(
    "/audit",
    summary="The audit log: operator actions, newest first",
    response_model=AuditPageOut,
    responses=errors(401, 404, 422),
)
async def list_audit(
    app: ReadApp,
    service: ServiceDep,
    cursor: Annotated[str | None, Query(description=CURSOR, pattern=AUDIT_CURSOR_PATTERN)] = None,
    limit: Annotated[int, Query(ge=1, le=1000, description="Page size")] = 50,
) -> Response:
    """Kept as long as the event log (``retention``), then deleted by the retention step."""
    page = await app.audit.log(cursor=cursor, limit=limit)
    return await page_response(page, AuditEntry.to_dict, service.settings.core.page_bytes)
