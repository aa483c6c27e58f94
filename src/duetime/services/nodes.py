"""The node's own upkeep: register it, renew its leases every heartbeat, deregister it.

A worker's leases are renewed only for the timers it knows it holds (``held``), and every
heartbeat re-reads the live nodes' subscriptions, which decide where events are routed.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Iterable

from duetime.clock import Clock
from duetime.config import Settings
from duetime.dispatch import Dispatch
from duetime.model import Node, Subscription
from duetime.services.base import Periodic
from duetime.store.protocol import Store

log = logging.getLogger("duetime.services")


class NodeUpkeep(Periodic):
    """Registers ``node_id`` at start, heartbeats it, deregisters it at close."""

    name = "heartbeat"
    failure = "heartbeat failed; leases are not being renewed"

    def __init__(
        self,
        store: Store,
        clock: Clock,
        settings: Settings,
        node_id: str,
        role: str,
        *,
        subscriptions: tuple[Subscription, ...] = (),
        held: Callable[[], Iterable[int]] = tuple,
        dispatch: Dispatch | None = None,
    ) -> None:
        """``held`` lists the timers whose leases to renew; ``dispatch`` (a worker's) is
        refreshed with the live nodes' subscriptions at start and at every heartbeat."""
        super().__init__(settings.heartbeat.total_seconds())
        self.store = store
        self.clock = clock
        self.lease = settings.lease
        self.node_id = node_id
        self.role = role
        self.subscriptions = subscriptions
        self.held = held
        self.dispatch = dispatch

    async def start(self) -> None:
        now = self.clock.now()
        await self.store.register_node(
            Node(
                self.node_id,
                socket.gethostname(),
                os.getpid(),
                now,
                now,
                role=self.role,
                subscriptions=self.subscriptions,
            )
        )
        await self.refresh_subscriptions()

    async def step(self) -> None:
        now = self.clock.now()
        try:
            await self.store.heartbeat(self.node_id, now, now + self.lease, list(self.held()))
        except Exception:
            log.exception(self.failure)
        try:
            await self.refresh_subscriptions()
        except Exception:
            log.exception("reading the nodes' subscriptions failed; routing as before")

    async def refresh_subscriptions(self) -> None:
        """Read the live nodes' subscriptions: where events are routed from now on."""
        if self.dispatch is not None:
            nodes = await self.store.list_nodes()
            self.dispatch.refresh(nodes, self.clock.now(), self.lease)

    async def close(self) -> None:
        try:
            await self.store.deregister_node(self.node_id)
        except Exception:
            log.exception("could not deregister node %s", self.node_id)
