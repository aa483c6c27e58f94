"""The reference clock: the machine's clock, read by a process no fault touches.

A worker under libfaketime reads a skewed clock, so it cannot say when its own handler started.
It asks this small server instead, over a Unix socket: one byte in, the server's
``time.time_ns()`` out (8 bytes). The answer is taken after the handler began, so a recorded
start is never earlier than the real one: a start recorded before its due time was early for
certain; lateness is overstated by one round trip (tens of microseconds).

``python -m bench.chaoslib.refclock SOCKET`` serves until killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time


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
    """A worker's connection to the reference clock (opened on first use)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = asyncio.Lock()
        self._stream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def now_us(self) -> int:
        async with self._lock:
            if self._stream is None:
                self._stream = await asyncio.open_unix_connection(self.path)
            reader, writer = self._stream
            writer.write(b"t")
            return int.from_bytes(await reader.readexactly(8), "big") // 1000


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1]))
