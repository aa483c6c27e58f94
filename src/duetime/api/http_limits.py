"""Bounds on what a client may send before its request is even read: header size, count, time.

uvicorn's httptools protocol keeps no limit of its own: a huge header is buffered whole, and
re-copied as it grows, which takes the CPU every other client needs. So the bytes of a request's
head (request line and headers) are counted as they arrive, before the parser sees them, and
past :data:`MAX_HEADER_BYTES` or :data:`MAX_HEADERS` lines the connection is answered
``431 Request Header Fields Too Large`` and closed; a head not complete within
``head_timeout`` seconds of the connection (or of its first byte, on a kept-alive connection) is
answered ``408 Request Timeout`` and closed, so slowly dripped headers cannot hold a
connection for ever. Where httptools is missing (PyPy), uvicorn's h11 protocol bounds the head
by itself (``h11_max_incomplete_event_size``), answering 400.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

MAX_HEADER_BYTES = 64 * 1024
"""The request line and every header together: far above what a browser sends (a bearer token
and a few cookies are a few KiB); Node allows 16 KiB, nginx four buffers of 8 KiB."""
MAX_HEADERS = 100
"""Header lines of one request (Apache's ``LimitRequestFields``)."""
HEAD_TIMEOUT = 10.0
"""Seconds a client has to send a whole request head once it has connected or begun one."""

_END_OF_HEAD = b"\r\n\r\n"


def http_protocol(head_timeout: float = HEAD_TIMEOUT) -> tuple[type[asyncio.Protocol] | str, int]:
    """uvicorn's ``http=`` (a protocol class that enforces the bounds, or ``"h11"``) and its
    ``h11_max_incomplete_event_size``.

    Why a subclass of uvicorn's internal httptools protocol rather than a setting: uvicorn has
    no supported setting for any of these bounds with httptools. Its only one on a request's
    head, ``h11_max_incomplete_event_size``, applies to the h11 protocol alone, bounds bytes
    but neither the number of header lines nor the time a head may take to arrive, and h11
    parses in Python (more CPU a request than httptools' C parser, on the busiest route).
    ``limit_concurrency`` and ``timeout_keep_alive`` bound connections and idle time, not a
    head being sent. ``http=`` taking a protocol class is uvicorn's own typed setting; the
    class below leans on its parent's parser callbacks (``on_message_begin``,
    ``on_headers_complete``), which ``tests/acceptance/test_api_headers.py`` exercises against
    a real server, so a uvicorn release that renames them fails there, not in production."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # no httptools: h11 bounds the head itself
        return "h11", MAX_HEADER_BYTES

    class BoundedHeadProtocol(HttpToolsProtocol):
        """httptools' protocol, refusing a head too large, too many lines or too slow."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._in_head = True
            self._head_bytes = 0
            self._head_lines = 0
            self._tail = b""
            self._head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)  # type: ignore[arg-type]
            self._start_head_timer()

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_head_timer()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self._in_head and not self._head_fits(data):
                self._stop_head_timer()
                self._refuse(
                    431,
                    "headers_too_large",
                    f"a request's headers may take at most {MAX_HEADER_BYTES} bytes "
                    f"in at most {MAX_HEADERS} lines",
                )
                return
            super().data_received(data)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._in_head = True
            self._head_bytes = self._head_lines = 0
            self._tail = b""
            self._start_head_timer()

        def on_headers_complete(self) -> None:
            self._in_head = False
            self._stop_head_timer()
            super().on_headers_complete()

        def _head_fits(self, data: bytes) -> bool:
            """Count the bytes and lines of ``data`` that belong to the head (up to its blank
            line, which may straddle two reads); whether the head is still within bounds."""
            seen = self._tail + data
            end = seen.find(_END_OF_HEAD)
            head = data if end < 0 else seen[len(self._tail) : end + len(_END_OF_HEAD)]
            self._head_bytes += len(head)
            self._head_lines += head.count(b"\n")
            self._tail = seen[-(len(_END_OF_HEAD) - 1) :] if end < 0 else b""
            if end >= 0:
                self._in_head = False  # the parser says so too, in on_headers_complete
            return self._head_bytes <= MAX_HEADER_BYTES and self._head_lines <= MAX_HEADERS + 2

        def _start_head_timer(self) -> None:
            if self._head_timer is None:
                self._head_timer = self.loop.call_later(head_timeout, self._head_too_slow)

        def _stop_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_too_slow(self) -> None:
            self._head_timer = None
            if self._in_head and not self.transport.is_closing():
                self._refuse(
                    408,
                    "request_timeout",
                    f"a request's headers must arrive within {head_timeout:g} seconds",
                )

        def _refuse(self, status: int, code: str, message: str) -> None:
            self.logger.warning("refused a request from %s: %s", _peer(self.client), message)
            self._in_head = False
            self.transport.write(_answer(status, code, message))
            self.transport.close()

    return BoundedHeadProtocol, MAX_HEADER_BYTES


_REASONS = {408: "Request Timeout", 431: "Request Header Fields Too Large"}


def _answer(status: int, code: str, message: str) -> bytes:
    """A whole HTTP/1.1 answer closing the connection, its body the API's JSON error."""
    body = json.dumps({"code": code, "message": message, "field": "headers"}).encode()
    head = (
        f"HTTP/1.1 {status} {_REASONS[status]}\r\n"
        "content-type: application/json\r\n"
        f"content-length: {len(body)}\r\n"
        "x-content-type-options: nosniff\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


def _peer(client: tuple[str, int] | None) -> str:
    return "an unknown peer" if client is None else f"{client[0]}:{client[1]}"
