"""Rescue: work whose lease ran out goes back to be claimed again.

Leases expire when their node stops renewing them (it died, or was paused past the lease);
rescue is by lease expiry, never by a fixed long timeout. A node on this host whose process is
gone cannot renew anything, so its leases are ended at once when a worker starts.
"""

from __future__ import annotations

import logging
import os
import socket

from duetime.clock import Clock
from duetime.services.base import Periodic
from duetime.store.protocol import Store

log = logging.getLogger("duetime.services")


class Rescuer(Periodic):
    """Rescues expired leases at start and every ``interval`` seconds."""

    name = "rescue"
    failure = "rescuing expired leases failed"

    def __init__(self, store: Store, clock: Clock, interval: float, node_id: str) -> None:
        """``node_id`` is this process's own node, never taken for a dead one."""
        super().__init__(interval)
        self.store = store
        self.clock = clock
        self.node_id = node_id

    async def start(self) -> None:
        await self.rescue_dead_local_nodes()
        await self.step()

    async def step(self) -> None:
        rescued = await self.store.rescue(self.clock.now())
        if rescued:
            log.warning("rescued %d timers whose lease had expired", len(rescued))

    async def rescue_dead_local_nodes(self) -> None:
        """Nodes on this host whose process is gone cannot renew leases: end them now."""
        host = socket.gethostname()
        for node in await self.store.list_nodes():
            if node.host != host or node.id == self.node_id or process_alive(node.pid):
                continue
            ended = await self.store.expire_leases_of(node.id, self.clock.now())
            await self.store.deregister_node(node.id)
            if ended:
                log.warning(
                    "node %s (pid %d) is gone; rescuing its %d timers", node.id, node.pid, ended
                )


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
