"""The nodes a store knows: each running duetime process registers, beats its heart (renewing
the leases of what it works on) and leaves; a node known to be gone has its leases ended.

Part of the :class:`~duetime.store.protocol.Store` protocol (a base of it), kept apart so what a
node's life asks of a database reads in one place.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import Protocol

from duetime.model import HeldRow, Node

ClockRead = Callable[[], Awaitable[datetime | None]]
ClockSampler = Callable[[ClockRead], Awaitable[None]]
"""Takes a reading of the database's clock through the function it is handed."""


class NodeRegistry(Protocol):
    """Registering nodes, their heartbeats (which extend their leases), and their leaving."""

    async def expire_leases_of(self, node_id: str, now: datetime) -> int:
        """End the leases of a node known to be gone (e.g. its process no longer exists)."""
        ...

    async def register_node(self, node: Node) -> None: ...

    async def heartbeat(
        self,
        node_id: str,
        now: datetime,
        lease_until: datetime,
        held: Sequence[HeldRow],
        clock_offset: timedelta | None = None,
        sample_clock: ClockSampler | None = None,
    ) -> int:
        """Refresh the node's heartbeat and extend its leases on ``held`` (the timers it knows it
        is working on, each with the token of the claim it holds it by); returns leases extended.
        A lease the node does not list is not renewed, so work whose claim answer never reached it
        is rescued when the lease runs out; nor is a row held under another claim than the one
        listed (a later claim of the same attempt, after the database forgot the first).
        ``clock_offset``: the node's latest measure of its clock against the database's.
        ``sample_clock`` is handed a function that reads the database's clock inside the
        heartbeat's transaction (a store whose clock is this machine's does not call it)."""
        ...

    async def deregister_node(self, node_id: str) -> None: ...

    async def list_nodes(self) -> list[Node]: ...
