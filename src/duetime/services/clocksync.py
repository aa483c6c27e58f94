"""Keep this process on the database's clock: sync at start, read it at every heartbeat, and say
how far this machine's own clock is from it.

Every decision that compares with "now" (is it due, has a lease expired, is a node alive) uses
the :class:`~duetime.clock.DatabaseClock`; this service keeps its reading fresh and reports the
offset (log, ``duetime nodes``, the ``duetime_clock_offset_seconds`` metric).
"""

from __future__ import annotations

import logging
from datetime import timedelta

from duetime.clock import ClockReading, DatabaseClock
from duetime.services.base import Periodic

log = logging.getLogger("duetime.clock")


FRESH = 1.5
"""A reading younger than this many intervals needs no sync of its own (a heartbeat's round
and this one's drift apart a little)."""


class ClockSync(Periodic):
    """Re-reads the database's clock every ``interval`` seconds; warns past ``warn``."""

    name = "clock"
    failure = "reading the database's clock failed; keeping the last reading"
    retry_after = 0.5
    """After a failed sync (the database away: a restart, a failover), sync again as soon as
    it answers, not a heartbeat later: after a failover its clock is another machine's."""

    def __init__(self, clock: DatabaseClock, interval: float, warn: timedelta) -> None:
        super().__init__(interval)
        self.clock = clock
        self.warn = warn
        self._warned = False

    async def start(self) -> None:
        reading = await self.clock.sync()
        if reading is None:
            log.info("clock: the database runs on this machine's clock")
            return
        log.info(
            "clock: this machine is %s the database's clock (±%s)",
            describe_offset(reading.offset),
            _ms(reading.uncertainty),
        )
        self._check(reading)

    async def step(self) -> None:
        """Check the latest reading; read the clock here only when no heartbeat did lately.

        A node's heartbeat reads the database's clock inside its own transaction (see
        :class:`~duetime.services.nodes.NodeUpkeep`), so a round here costs no transaction
        while heartbeats go through; it reads the clock itself when they do not (a failing
        heartbeat, a process without one)."""
        clock = self.clock
        reading = clock.last
        if not clock.read_within(FRESH * self.interval):
            reading = await clock.sync()
        if reading is not None:
            self._check(reading)

    def _check(self, reading: ClockReading) -> None:
        far = abs(reading.offset) > self.warn
        if far and not self._warned:
            log.warning(
                "clock: this machine is %s the database's clock (more than %s): due times and "
                "leases follow the database, but fix the machine's time (NTP)",
                describe_offset(reading.offset),
                _ms(self.warn),
            )
        elif self._warned and not far:
            log.info("clock: back within %s of the database's clock", _ms(self.warn))
        self._warned = far


def describe_offset(offset: timedelta) -> str:
    """``"1.250 s behind"`` / ``"0.003 s ahead of"`` (a positive offset: this machine is behind)."""
    seconds = offset.total_seconds()
    return f"{abs(seconds):.3f} s {'behind' if seconds > 0 else 'ahead of'}"


def _ms(delta: timedelta) -> str:
    return f"{delta.total_seconds() * 1000:.1f} ms"
