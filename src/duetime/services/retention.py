"""The retention service: runs the store's maintenance step every ``maintenance_interval``.

Every worker runs one, so history is kept in check wherever duetime runs, with nothing else to
deploy; several at once are safe (the store takes rows with ``SKIP LOCKED`` or under its write
lock, and changes partitions under an advisory lock) and cheap (a round with nothing to do is a
few index probes). Rounds are spread out at random around the interval, so workers started
together do not all maintain at the same moment.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
from datetime import datetime, timedelta

from duetime.clock import Clock
from duetime.config import Settings
from duetime.model.history import MaintenanceReport, RetentionPolicy
from duetime.services.base import Service
from duetime.store.protocol import Store

log = logging.getLogger("duetime.retention")

JITTER = 0.2
"""Each pause is the interval times a random factor in [1 - JITTER, 1 + JITTER]."""


def policy_of(settings: Settings) -> RetentionPolicy:
    return RetentionPolicy(retention=settings.retention, archive_after=settings.archive_after)


async def maintain(store: Store, policy: RetentionPolicy, now: datetime) -> MaintenanceReport:
    """One round: the history's (archive, delete, partitions), then the audit log's entries
    past the same retention, in batches — the log of who did what lasts as long as the event
    log of what happened."""
    report = await store.history.maintain(policy, now)
    before, pruned = policy.delete_before(now), 0
    while step := await store.audit.prune(before, policy.batch_size):
        pruned += step
    return dataclasses.replace(report, audit_deleted=pruned)


class Retention(Service):
    """Maintains the store's history: :meth:`run_once` now, or :meth:`run` until stopped."""

    name = "retention"

    def __init__(
        self,
        store: Store,
        clock: Clock,
        policy: RetentionPolicy,
        interval: timedelta,
        *,
        rng: random.Random | None = None,
    ) -> None:
        if interval <= timedelta(0):
            raise ValueError("the maintenance interval must be positive")
        self.store = store
        self.clock = clock
        self.policy = policy
        self.interval = interval
        self.rounds = 0
        self.total = MaintenanceReport()
        self._rng = rng or random.Random()

    @classmethod
    def from_settings(cls, store: Store, clock: Clock, settings: Settings) -> Retention:
        return cls(store, clock, policy_of(settings), settings.maintenance_interval)

    async def run_once(self) -> MaintenanceReport:
        """One maintenance round at the clock's now."""
        report = await maintain(self.store, self.policy, self.clock.now())
        self.rounds += 1
        self.total += report
        if report.changed:
            log.info(
                "retention: archived %d, deleted %d, audit entries deleted %d, "
                "partitions created %s, dropped %s",
                report.archived,
                report.deleted,
                report.audit_deleted,
                ", ".join(report.partitions_created) or "-",
                ", ".join(report.partitions_dropped) or "-",
            )
        return report

    async def run(self, stop_event: asyncio.Event) -> None:
        """A round after each pause until ``stop_event`` is set; failures are logged and
        retried next round (the store's work is idempotent: a half-done round is resumed)."""
        while not await self._pause(stop_event):
            try:
                await self.run_once()
            except Exception:
                log.exception("the retention step failed; retrying next round")

    async def _pause(self, stop_event: asyncio.Event) -> bool:
        """Wait about one interval; True when stopped meanwhile."""
        factor = 1 + self._rng.uniform(-JITTER, JITTER)
        try:
            await asyncio.wait_for(
                stop_event.wait(), timeout=self.interval.total_seconds() * factor
            )
        except TimeoutError:
            return stop_event.is_set()
        return True
