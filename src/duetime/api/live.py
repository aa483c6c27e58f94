"""``GET /v1/namespaces/{namespace}/live``: a server-sent event stream that says "something
changed", so the dashboard refreshes the panel in view instead of polling the whole page.

One task per server polls the store's change marker (:meth:`Store.change_marker`: SQLite's
``data_version`` and the connection's own changes; PostgreSQL's next transaction id) once a
second, and only while a page listens; every stream waits on it. A stream says ``changed`` at
most once per poll, and a comment every 15 s keeps proxies from closing it. When the server
stops, :meth:`Changes.close` ends every stream at once (``duetime serve`` calls it on SIGTERM),
so an open page never holds up a graceful shutdown; under any other server a stream ends by
itself after :data:`LIFETIME` and the page opens the next.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from duetime.api.deps import ServiceDep, VisibleApp
from duetime.api.schemas import errors

KEEP_ALIVE = 15.0
"""Seconds of quiet after which a stream sends a comment line."""
LIFETIME = 25.0
"""Seconds after which a stream ends and the page opens another: under a server that does not
tell the API it is stopping (plain uvicorn, an app mounting the API), a graceful shutdown
waits for open requests, so no stream may stay open longer than this."""

router = APIRouter(prefix="/v1/namespaces/{namespace}", tags=["live"])


@router.get(
    "/live",
    summary="Server-sent events: 'changed' whenever the database may have changed",
    response_class=StreamingResponse,
    responses=errors(401, 404, extra={200: {"content": {"text/event-stream": {}}}}),
)
async def live(app: VisibleApp, service: ServiceDep, request: Request) -> StreamingResponse:
    """``event: changed`` (data: a counter) at most once a second; re-read what you show.
    The database's clock of changes is shared by every namespace, so a change in another
    namespace may say ``changed`` too: a listener learns that something was written, never
    where or what (a marker per namespace would put every write of a namespace on one row)."""
    changes = service.changes

    async def stream() -> AsyncIterator[str]:
        yield "retry: 2000\n\n"
        async with changes.listening():
            seen = changes.version
            end = asyncio.get_running_loop().time() + LIFETIME
            while not changes.closed and not await request.is_disconnected():
                left = end - asyncio.get_running_loop().time()
                if left <= 0:
                    return
                version = await changes.wait(seen, min(KEEP_ALIVE, left))
                if changes.closed:
                    return
                if version != seen:
                    seen = version
                    yield f"event: changed\ndata: {version}\n\n"
                else:
                    yield ": still here\n\n"

    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)
