"""The delayed-notification worker: schedule-events in, notifications out at their time.

Schedule-events ``{"id", "executionDate", "userId", ...}`` arrive on ``schedule-event``, read by
the ``scheduling-worker`` consumer group — a Kafka topic (:mod:`.on_kafka`, as the original ran it)
or a Redis stream (:mod:`.on_redis`). duetime stores each as the timer ``notification:<id>`` (a
redelivered or repeated event updates it; it never doubles) and commits the offset / acknowledges
the entry only after the timer is committed. At ``executionDate`` the worker sends the
notification to ``delayed-notification-sender``. Malformed events are dead-lettered with the
reason (``schedule-event.dead`` on Kafka, ``schedule-event:dead`` on Redis).

The acceptance window (default 5 minutes) is where this differs from the original. Its filter
dropped, silently, every event not due within "now .. now + 5 minutes" *when it arrived*: past
ones and far-future ones alike. Here every valid event is kept; the window only says how late a
notification may still be sent. One found due later than that (the worker was down, the event
arrived late) is recorded ``expired`` with the reason — visible in its history and metrics —
instead of being sent stale or vanishing.

The database comes from ``DUETIME_DATABASE_URL`` (default ``sqlite:///delayed_notifications.db``).
"""

from __future__ import annotations

import asyncio
import os
from datetime import timedelta
from typing import Protocol

import duetime
from duetime.destinations import as_handler
from duetime.destinations.base import Destination
from duetime.sources import ScheduleCommand, run_worker_with_sources
from duetime.sources.base import Source, SourceStats
from duetime.sources.mappings import NOTIFICATION_TYPE
from examples.delayed_notifications.on_kafka import KafkaTopology
from examples.delayed_notifications.on_redis import RedisTopology

DATABASE_URL = os.environ.get("DUETIME_DATABASE_URL") or "sqlite:///delayed_notifications.db"
DELAYED_NOTIFICATION = NOTIFICATION_TYPE
"""The event type of a notification timer (``delayed-notification``)."""
ACCEPTANCE_WINDOW = timedelta(minutes=5)

__all__ = ["DelayedNotifications", "KafkaTopology", "RedisTopology", "schedule_event"]

SCHEDULE_EVENT = "schedule-event"
NOTIFICATION_SENDER = "delayed-notification-sender"
"""The original topic names (stream names on Redis), before any ``--prefix``."""
SEPARATORS = ".-_:"


def named(prefix: str, name: str) -> str:
    """``name`` under ``prefix``: ``staging`` + ``schedule-event`` → ``staging.schedule-event``.

    A prefix that already ends in a separator (``staging-``, ``team:``) is used as it is, and
    no prefix leaves the original names.
    """
    if not prefix or prefix[-1] in SEPARATORS:
        return f"{prefix}{name}"
    return f"{prefix}.{name}"


class CountingSource(Source, Protocol):
    stats: SourceStats


class Topology(Protocol):
    """A broker's wiring: where schedule-events come from and notifications go."""

    def describe(self) -> str: ...

    async def prepare(self) -> None: ...

    def source(self, app: duetime.AsyncApp, command: ScheduleCommand) -> CountingSource: ...

    def destination(self) -> Destination: ...


class DelayedNotifications:
    """The worker: a source of schedule-events, duetime, a destination for notifications."""

    def __init__(
        self,
        database_url: str | None = None,
        *,
        topology: Topology | None = None,
        acceptance_window: timedelta | None = ACCEPTANCE_WINDOW,
        clock: duetime.Clock | None = None,
    ) -> None:
        self.topology: Topology = topology or KafkaTopology()
        self.app = duetime.AsyncApp(database_url or DATABASE_URL, clock=clock)
        self.destination = self.topology.destination()
        self.app.handler(DELAYED_NOTIFICATION)(as_handler(self.destination))
        command = ScheduleCommand.named("schedule_event", acceptance_window=acceptance_window)
        self.source = self.topology.source(self.app, command)

    async def run(self, stop: asyncio.Event) -> None:
        """Consume schedule-events and send due notifications until ``stop`` is set."""
        await self.topology.prepare()
        try:
            await run_worker_with_sources(self.app, [self.source], stop)
        finally:
            await self.destination.close()
            await self.app.close()

    async def expired(self) -> list[duetime.Timer]:
        """Notifications that were found too late to send: kept, with the reason, not dropped."""
        page = await self.app.timers.history(status=duetime.Status.EXPIRED, limit=1000)
        return page.items


def schedule_event(
    event_id: str, execution_date: str, *, user_id: str = "user-789", **extra: str
) -> dict[str, str]:
    """A schedule-event as the game service publishes it (``createdDate`` etc. optional)."""
    return {
        "id": event_id,
        "executionDate": execution_date,
        "userId": user_id,
        "status": "PENDING",
        **extra,
    }
