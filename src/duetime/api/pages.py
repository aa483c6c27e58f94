"""A listing page rendered as JSON off the event loop, an item at a time, within a byte budget.

A page of a thousand large payloads is tens of megabytes of JSON: rendered whole on the event
loop it held every other tenant's request for seconds. Here each item is rendered on its own
(the interpreter can switch threads between items) on a worker thread, and the page ends
early, with the cursor after its last item, once its JSON would pass ``page_bytes``
(``DUETIME_PAGE_BYTES``); it always holds one item, so a walk through the pages always ends.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any, TypeVar

from starlette.responses import Response

from duetime.model import Page
from duetime.support.escaping import escape_json_controls

T = TypeVar("T")

MEDIA_TYPE = "application/json"


def _json(value: Any) -> bytes:
    """The same text as :class:`duetime.api.responses.JSONResponse` renders."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return escape_json_controls(text).encode("utf-8")


def render_page(page: Page[T], item: Callable[[T], Any], max_bytes: int) -> bytes:
    """``{"items": [...], "next_cursor": ...}`` of ``page``, each item as ``item`` shows it,
    ending after the last item that keeps the items within ``max_bytes`` (one at least)."""
    parts: list[bytes] = []
    size = 0
    for shown in page.items:
        text = _json(item(shown))
        if parts and size + len(text) + 1 > max_bytes and page.cursor_of is not None:
            break
        parts.append(text)
        size += len(text) + 1
    ended = page.ended_after(len(parts))
    return b"".join(
        (b'{"items":[', b",".join(parts), b'],"next_cursor":', _json(ended.next_cursor), b"}")
    )


async def page_response(page: Page[T], item: Callable[[T], Any], max_bytes: int) -> Response:
    """:func:`render_page` on a worker thread: the event loop serves other requests meanwhile."""
    body = await asyncio.to_thread(render_page, page, item, max_bytes)
    return Response(body, media_type=MEDIA_TYPE)
