"""Dead-letter what no live node takes: pending rows overdue by a grace, unsubscribed.

Without it, an event whose only subscriber went away would wait forever, unseen. The scan is
bounded (:data:`SWEEP_SCAN` oldest overdue rows), so a backlog costs it little. It runs in the
rescuer's round (:class:`~duetime.services.rescuer.Rescuer`), in the same transaction as the
rescue and the read of the live nodes it decides by: an idle worker's upkeep is one transaction
every ``rescue_interval``, not three.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from duetime.dispatch import Dispatch
from duetime.services.nodes import NodeUpkeep
from duetime.store.protocol import Store

log = logging.getLogger("duetime.services")

SWEEP_SCAN = 1000
"""Oldest overdue rows a no-subscriber sweep looks at: bounded, so a backlog costs it little."""


class Sweeper:
    """Dead-letters rows of ``namespace`` no live node subscribes to once they are ``grace``
    overdue (never when ``grace`` is not positive)."""

    def __init__(
        self, store: Store, namespace: str, dispatch: Dispatch, grace: timedelta, upkeep: NodeUpkeep
    ) -> None:
        """``upkeep`` takes the live nodes each round reads: the routing follows them."""
        self.store = store
        self.namespace = namespace
        self.dispatch = dispatch
        self.grace = grace
        self.upkeep = upkeep

    @property
    def active(self) -> bool:
        return self.grace > timedelta(0)

    async def sweep(self, now: datetime, *, rescue: bool) -> list[int]:
        """One round, with the rescue when ``rescue``: the ids rescued."""
        before = now - self.grace
        if rescue:
            lease = self.upkeep.lease
            rescued, swept, nodes = await self.store.rescue_and_sweep(
                now,
                self.namespace,
                lambda nodes: self.dispatch.everyone_of(nodes, now, lease),
                before,
                SWEEP_SCAN,
            )
            self.upkeep.routed(nodes, now)
        else:
            await self.upkeep.refresh_subscriptions()
            rescued = []
            swept = await self.store.sweep_unsubscribed(
                self.namespace, self.dispatch.everyone(), before, now, SWEEP_SCAN
            )
        if swept:
            log.warning(
                "dead-lettered %d timers of namespace %s that no live node subscribes to",
                len(swept),
                self.namespace,
            )
        return rescued
