"""Dead-letter what no live node takes: pending rows overdue by a grace, unsubscribed.

Without it, an event whose only subscriber went away would wait forever, unseen. The scan is
bounded (:data:`SWEEP_SCAN` oldest overdue rows), so a backlog costs it little.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from duetime.clock import Clock
from duetime.dispatch import Dispatch
from duetime.services.base import Periodic
from duetime.services.nodes import NodeUpkeep
from duetime.store.protocol import Store

log = logging.getLogger("duetime.services")

SWEEP_SCAN = 1000
"""Oldest overdue rows a no-subscriber sweep looks at: bounded, so a backlog costs it little."""


class Sweeper(Periodic):
    """Every ``interval`` seconds, dead-letters rows of ``namespace`` no live node subscribes
    to once they are ``grace`` overdue."""

    name = "sweep"
    failure = "dead-lettering unsubscribed timers failed"

    def __init__(
        self,
        store: Store,
        clock: Clock,
        interval: float,
        namespace: str,
        dispatch: Dispatch,
        grace: timedelta,
        upkeep: NodeUpkeep,
    ) -> None:
        """``upkeep`` refreshes ``dispatch`` with the live nodes' subscriptions first."""
        super().__init__(interval)
        self.store = store
        self.clock = clock
        self.namespace = namespace
        self.dispatch = dispatch
        self.grace = grace
        self.upkeep = upkeep

    async def step(self) -> None:
        if self.grace <= timedelta(0):
            return
        await self.upkeep.refresh_subscriptions()
        now = self.clock.now()
        swept = await self.store.sweep_unsubscribed(
            self.namespace, self.dispatch.everyone(), now - self.grace, now, SWEEP_SCAN
        )
        if swept:
            log.warning(
                "dead-lettered %d timers of namespace %s that no live node subscribes to",
                len(swept),
                self.namespace,
            )
