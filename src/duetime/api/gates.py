"""Fair turns between tenants: at most a few reads of one namespace run at once.

A tenant that sends its most expensive listing from many clients at once would otherwise have
the server (its event loop, SQLite's one connection thread, the pool) work on nothing else: a
request from another tenant waits behind all of them. Each namespace's reads take turns at a
gate of ``reads_per_namespace`` places; the rest wait there, costing nothing, and one that
cannot get a place within ``statement_timeout`` (as long as the read before it may run) is
answered 503 with ``Retry-After``. Other tenants never queue at this tenant's gate.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from duetime.errors import StoreBusy


class NamespaceGates:
    """One gate of ``places`` per namespace, made on first use, dropped once idle."""

    def __init__(self, places: int, wait: float) -> None:
        self.places = places
        self.wait = wait
        self._gates: dict[str, asyncio.Semaphore] = {}
        self._users: dict[str, int] = {}

    def users(self, namespace: str) -> int:
        """How many of the namespace's reads are at its gate now, inside or waiting."""
        return self._users.get(namespace, 0)

    @contextlib.asynccontextmanager
    async def turn(self, namespace: str) -> AsyncIterator[None]:
        """Hold one of the namespace's places for the block (StoreBusy if none comes free)."""
        gate = self._gates.get(namespace)
        if gate is None:
            gate = self._gates[namespace] = asyncio.Semaphore(self.places)
        self._users[namespace] = self._users.get(namespace, 0) + 1
        try:
            try:
                async with asyncio.timeout(self.wait):
                    await gate.acquire()
            except TimeoutError:
                raise StoreBusy(
                    f"namespace {namespace!r} already has {self.places} reads under way and "
                    f"none ended within statement_timeout ({self.wait:g} s); try again shortly"
                ) from None
            try:
                yield
            finally:
                gate.release()
        finally:
            self._users[namespace] -= 1
            if not self._users[namespace]:
                del self._users[namespace], self._gates[namespace]
