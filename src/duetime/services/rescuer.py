"""Rescue: work whose lease ran out goes back to be claimed again.

Leases expire when their node stops renewing them (it died, or was paused past the lease);
rescue is by lease expiry, never by a fixed long timeout. A node on this host whose process is
gone cannot renew anything, so its leases are ended at once when a worker starts.

When the clock that decides leases steps (the machine's wall clock on SQLite, set by NTP or
after a suspend), every lease may look expired at once although its owner is alive: rescue then
waits one lease, long enough for every live owner to renew, before it takes anything.

A worker's rescue round also sweeps what no live node subscribes to
(:class:`~duetime.services.sweeper.Sweeper`), in the same transaction.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable
from datetime import timedelta

from duetime.clock import Clock, elapsed_seconds, is_real
from duetime.services.base import Periodic
from duetime.services.sweeper import Sweeper
from duetime.store.protocol import Store

log = logging.getLogger("duetime.services")

CLOCK_STEP = 1.0
"""Seconds the clock may move against the elapsed time between two rounds before it counts as
a step (a round's own jitter is far below it)."""


class Rescuer(Periodic):
    """Rescues expired leases at start and every ``interval`` seconds."""

    name = "rescue"
    failure = "rescuing expired leases failed"

    def __init__(
        self,
        store: Store,
        clock: Clock,
        interval: float,
        node_id: str,
        lease: timedelta,
        *,
        elapsed: Callable[[], float] = elapsed_seconds,
        sweeper: Sweeper | None = None,
    ) -> None:
        """``node_id`` is this process's own node, never taken for a dead one; ``lease`` is how
        long rescue waits after the clock stepped; ``sweeper`` sweeps in each round."""
        super().__init__(interval)
        self.store = store
        self.clock = clock
        self.node_id = node_id
        self.lease = lease
        self._elapsed = elapsed
        self.sweeper = sweeper
        self._mark: float | None = None  # the clock's reading minus the elapsed time
        self._quiet_until = float("-inf")  # no rescue before this elapsed time

    async def start(self) -> None:
        await self.rescue_dead_local_nodes()
        # No sweep yet: a one-shot tick, or nodes starting together, would dead-letter types
        # whose subscribers have not registered; the first periodic round sweeps.
        await self._round(sweep=False)

    async def step(self) -> None:
        await self._round(sweep=True)

    async def _round(self, *, sweep: bool) -> None:
        rescue = not self._clock_stepped()
        sweeper = self.sweeper
        if sweep and sweeper is not None and sweeper.active:
            rescued = await sweeper.sweep(self.clock.now(), rescue=rescue)
        elif rescue:
            rescued = await self.store.rescue(self.clock.now())
        else:
            return
        if rescued:
            log.warning("rescued %d timers whose lease had expired", len(rescued))

    def _clock_stepped(self) -> bool:
        """True while rescue waits after a step of the clock (see the module's docstring)."""
        if not is_real(self.clock):
            return False  # a test clock moves by hand, on purpose
        elapsed = self._elapsed()
        mark = self.clock.now().timestamp() - elapsed
        if self._mark is not None and abs(mark - self._mark) > CLOCK_STEP:
            log.warning(
                "the clock stepped by %+.1f s; rescue waits %s so that live nodes renew their "
                "leases first",
                mark - self._mark,
                self.lease,
            )
            self._quiet_until = elapsed + self.lease.total_seconds()
        self._mark = mark
        return elapsed < self._quiet_until

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
