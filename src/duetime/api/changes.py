"""Whether the database changed: one poll of the store's change marker a second, shared by
every live stream of the server (see :mod:`duetime.api.live`), running only while one listens.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

log = logging.getLogger("duetime.api")

POLL_EVERY = 1.0
"""Seconds between two reads of the change marker."""


class Changes:
    """The change marker, polled by one task while any stream listens; ``version`` counts
    the changes seen."""

    def __init__(self, marker: Callable[[], Awaitable[str]], interval: float = POLL_EVERY) -> None:
        """``marker``: the store's :meth:`~duetime.store.Store.change_marker`."""
        self.marker = marker
        self.interval = interval
        self.version = 0
        self.closed = False
        self._listeners = 0
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake = asyncio.Event()

    async def wait(self, seen: int, quiet: float) -> int:
        """The version once it differs from ``seen`` (or after ``quiet`` seconds, or closed)."""
        deadline = asyncio.get_running_loop().time() + quiet
        while self.version == seen and not self.closed:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), left)
        return self.version

    @contextlib.asynccontextmanager
    async def listening(self) -> AsyncIterator[None]:
        """While inside, the poll task runs (started by the first listener, ended by the last)."""
        self._loop = asyncio.get_running_loop()
        self._listeners += 1
        if self._task is None:
            self._task = asyncio.create_task(self._poll(), name="duetime-live")
        try:
            yield
        finally:
            self._listeners -= 1
            if self._listeners == 0 and self._task is not None:
                self._task.cancel()
                self._task = None

    def close(self) -> None:
        """End every stream now; safe from a signal handler or another thread."""
        self.closed = True
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._signal)

    def _signal(self) -> None:
        self._wake.set()
        self._wake = asyncio.Event()

    async def _poll(self) -> None:
        marker: str | None = None
        while True:
            try:
                current = await self.marker()
            except Exception as exc:  # the database is away: say nothing, try again
                log.debug("live: no change marker: %s", exc)
            else:
                if marker is not None and current != marker:
                    self.version += 1
                    self._signal()
                marker = current
            await asyncio.sleep(self.interval)
