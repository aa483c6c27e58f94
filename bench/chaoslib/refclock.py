"""The reference clock: the machine's clock, read by a process no fault touches.

A worker under libfaketime reads a skewed clock, so it cannot say when its own handler started.
It asks this small server instead, over a Unix socket: one byte in, the server's
``time.time_ns()`` out (8 bytes). The answer is taken after the handler began, so a recorded
start is never earlier than the real one: a start recorded before its due time was early for
certain; lateness is overstated by the time the request takes to reach the server (tens of
microseconds). Requests are never queued in the worker (see :class:`ReferenceClock`), so a
start is not recorded later than that either: one recorded after its attempt was recorded lost
began late, not merely waited for the clock.

``python -m bench.chaoslib.refclock SOCKET`` serves until killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections import deque


async def serve(path: str) -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                await reader.readexactly(1)
                writer.write(time.time_ns().to_bytes(8, "big"))
        writer.close()

    server = await asyncio.start_unix_server(answer, path)
    async with server:
        await server.serve_forever()


class ReferenceClock:
    """A worker's connection to the reference clock (opened on first use).

    Each request is sent the moment it is asked for, not after the answers to those before it:
    the instant recorded is then the server's as the handler began, however many handlers
    began together. Behind a lock, a handler waited for every round trip ahead of it, and a
    worker paused (SIGSTOP) meanwhile recorded starts after its pause that had begun, lease
    checked, before it: false stale starts. The answers come back in order, one a request."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._opening = asyncio.Lock()
        self._writer: asyncio.StreamWriter | None = None
        self._waiting: deque[asyncio.Future[int]] = deque()
        self._reading: asyncio.Task[None] | None = None

    async def now_us(self) -> int:
        writer = self._writer or await self._open()
        answer: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiting.append(answer)
        writer.write(b"t")
        return await answer

    async def _open(self) -> asyncio.StreamWriter:
        async with self._opening:
            if self._writer is None:
                reader, self._writer = await asyncio.open_unix_connection(self.path)
                self._reading = asyncio.get_running_loop().create_task(self._read(reader))
            return self._writer

    async def _read(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                at_ns = int.from_bytes(await reader.readexactly(8), "big")
                self._waiting.popleft().set_result(at_ns // 1000)
        except Exception as exc:
            while self._waiting:
                self._waiting.popleft().set_exception(exc)
            raise


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1]))
