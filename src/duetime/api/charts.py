"""``GET /v1/namespaces/{namespace}/charts``: throughput and lateness an operator steers — over
the last hour, day or week, of one event type (or glob) and one node — with lateness as
percentiles the database computes, not a mean that one slow minute hides in."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from duetime.api.deps import ReadApp
from duetime.api.responses import JSONResponse
from duetime.api.schemas import TYPE_GLOB_PATTERN, TypePattern, errors

router = APIRouter(prefix="/v1/namespaces/{namespace}", tags=["events"])


class ChartBucketOut(BaseModel):
    start: str = Field(description="The bucket's first instant (UTC)")
    fired: int = Field(description="Timers whose first attempt started in this bucket")
    by_status: dict[str, int] = Field(description="Those timers by their status now")
    lateness_p50_ms: float | None = Field(description="Median of start - due; null if none")
    lateness_p95_ms: float | None
    lateness_p99_ms: float | None
    lateness_max_ms: float | None


class ChartOut(BaseModel):
    """Oldest bucket first, the current (partial) one last."""

    range: Literal["1h", "24h", "7d"]
    bucket_seconds: int
    buckets: list[ChartBucketOut]


BUCKET_SECONDS = {"1h": 60, "24h": 900, "7d": 3600}


@router.get(
    "/charts",
    summary="Throughput and lateness percentiles over 1 h, 24 h or 7 d, by type and node",
    response_model=ChartOut,
    responses=errors(401, 404, 422),
)
async def charts(
    app: ReadApp,
    range: Annotated[
        Literal["1h", "24h", "7d"],
        Query(description="1h: 60 buckets of a minute; 24h: 96 of 15 min; 7d: 168 of an hour"),
    ] = "1h",
    type: Annotated[
        str | None, Query(description=TypePattern, pattern=TYPE_GLOB_PATTERN, max_length=200)
    ] = None,
    node: Annotated[
        str | None,
        Query(description="Only timers whose first attempt ran on this node", max_length=200),
    ] = None,
) -> JSONResponse:
    """Lateness is the first attempt's true start minus the due instant; percentiles are
    computed by the database (PostgreSQL ``percentile_cont``; SQLite from each bucket's
    ordered rows, interpolated the same way)."""
    buckets = await app.events.charts(range, type=type or None, node=node or None)
    return JSONResponse(
        {
            "range": range,
            "bucket_seconds": BUCKET_SECONDS[range],
            "buckets": [bucket.to_dict() for bucket in buckets],
        }
    )
