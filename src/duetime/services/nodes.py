"""The node's own upkeep: register it, renew its leases every heartbeat, deregister it.

A worker's leases are renewed only for the timers it knows it holds (``held``). The heartbeat's
transaction also reads the database's clock (a :class:`DatabaseClock`'s), and the live nodes'
subscriptions, which decide where events are routed, are re-read at every heartbeat unless
another round read them meanwhile (the rescuer's, every ``rescue_interval``): an idle worker
thus costs its database a transaction per heartbeat and one per rescue round.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from datetime import datetime, timedelta
from typing import Protocol

from duetime.clock import Clock, DatabaseClock
from duetime.config import Settings
from duetime.dispatch import Dispatch
from duetime.model import HeldRow, Node, Subscription
from duetime.services.base import Periodic
from duetime.store.protocol import Store

log = logging.getLogger("duetime.services")


class LeaseHolder(Protocol):
    """A worker, as its heartbeat sees it."""

    def held_now(self) -> tuple[list[HeldRow], int]:
        """The timers it holds (id and claim token), and a mark for :meth:`renewed`."""
        ...

    def renewed(self, mark: int, until: datetime) -> None:
        """Every lease listed with ``mark`` now runs until ``until``."""
        ...


class NodeUpkeep(Periodic):
    """Registers ``node_id`` at start, heartbeats it, deregisters it at close."""

    name = "heartbeat"
    failure = "heartbeat failed; leases are not being renewed"
    retry_after = 0.5
    """After a failed heartbeat (the database away: a restart, a failover), renew as soon as it
    answers again, not a heartbeat later: the leases have been running out all along."""
    steady = True
    """A heartbeat every ``heartbeat`` from the start of the last: one that took long (a busy
    database, a busy event loop) does not push the next one later still, since the leases it
    renews run out counted from its start."""

    def __init__(
        self,
        store: Store,
        clock: Clock,
        settings: Settings,
        node_id: str,
        role: str,
        *,
        subscriptions: tuple[Subscription, ...] = (),
        holder: LeaseHolder | None = None,
        dispatch: Dispatch | None = None,
    ) -> None:
        """``holder`` (a worker) has the timers whose leases to renew; ``dispatch`` (a worker's) is
        refreshed with the live nodes' subscriptions at start and at every heartbeat. A
        :class:`DatabaseClock` ``clock`` reports its offset with each heartbeat."""
        super().__init__(settings.heartbeat.total_seconds())
        self.store = store
        self.clock = clock
        self.lease = settings.lease
        self.node_id = node_id
        self.role = role
        self.subscriptions = subscriptions
        self.holder = holder
        self.dispatch = dispatch
        self._routing: asyncio.Task[None] | None = None  # the routing read under way
        self._routed_at = float("-inf")  # loop time of the last routing read

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
                clock_offset=self._offset(),
            )
        )
        await self.refresh_subscriptions()

    async def step(self) -> None:
        """Renew the node and its leases (a failure raises: the next try comes after
        :attr:`retry_after`), then re-read the routing beside the next heartbeats.

        The routing is read through the store's shared connections, which a busy worker's
        handlers may all hold for a while: awaited here, that read would hold the next
        renewal back with it, and the leases would run out while their worker lives. So it
        runs on its own task, one at a time (a round finding the last one still under way
        starts none)."""
        now = self.clock.now()
        held, mark = self.holder.held_now() if self.holder is not None else ([], 0)
        until = now + self.lease
        clock = self.clock
        sample = clock.sample if isinstance(clock, DatabaseClock) else None
        renewed = await self.store.heartbeat(
            self.node_id, now, until, held, self._offset(), sample_clock=sample
        )
        if self.holder is not None and renewed == len(held):
            self.holder.renewed(mark, until)
        routed_lately = asyncio.get_running_loop().time() - self._routed_at < self.interval
        if self.dispatch is None or routed_lately:
            return
        if self._routing is None or self._routing.done():
            self._routing = asyncio.create_task(self._reroute(), name="duetime-routing")

    async def _reroute(self) -> None:
        try:
            await self.refresh_subscriptions()
        except Exception:
            log.exception("reading the nodes' subscriptions failed; routing as before")

    def _offset(self) -> timedelta | None:
        return self.clock.offset if isinstance(self.clock, DatabaseClock) else None

    async def refresh_subscriptions(self) -> None:
        """Read the live nodes' subscriptions: where events are routed from now on."""
        if self.dispatch is not None:
            self.routed(await self.store.list_nodes(), self.clock.now())

    def routed(self, nodes: list[Node], now: datetime) -> None:
        """Route by the subscriptions of ``nodes`` (read at ``now``, here or in another round)."""
        if self.dispatch is not None:
            self.dispatch.refresh(nodes, now, self.lease)
            self._routed_at = asyncio.get_running_loop().time()

    async def close(self) -> None:
        routing, self._routing = self._routing, None
        if routing is not None:
            routing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await routing
        try:
            await self.store.deregister_node(self.node_id)
        except Exception:
            log.exception("could not deregister node %s", self.node_id)
