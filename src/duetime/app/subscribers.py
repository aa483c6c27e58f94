"""The facade's word on delivery: which live nodes would take a timer, and what waits for none.

Both read the nodes table (each node's handlers and routes, kept there by its heartbeat): one
query answers for every timer a request shows (:mod:`duetime.bus.subscribers`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from duetime.bus.subscribers import Subscribers
from duetime.clock import Clock
from duetime.config import Settings
from duetime.store import Store
from duetime.validation import check_limit


class SubscriberMethods:
    """Subscribers of the app's namespace (mixed into the facade)."""

    store: Store
    clock: Clock
    namespace: str
    settings: Settings

    if TYPE_CHECKING:

        async def open(self, *, create_namespace: bool | None = None) -> object:
            """Provided by the app."""

    async def subscribers(self) -> Subscribers:
        """The live nodes (heartbeat younger than the lease) and what each takes here: ask it
        how many would deliver a timer (:meth:`Subscribers.count`; 0 = no subscriber)."""
        await self.open()
        nodes = await self.store.list_nodes()
        return Subscribers.of(nodes, self.namespace, self.clock.now(), self.settings.lease)

    async def unsubscribed(
        self, limit: int = 20, *, subscribers: Subscribers | None = None
    ) -> list[tuple[str, int]]:
        """Pending timers that no live node would deliver, counted by type, most first."""
        check_limit(limit)
        found = subscribers if subscribers is not None else await self.subscribers()
        return await self.store.unsubscribed_types(self.namespace, found.everyone(), limit)
