"""Seed 004's delayed-notification worker, on Redis Streams: schedule-events in, notifications out.

Schedule-events ``{"id", "executionDate", "userId", ...}`` arrive on the ``schedule-event``
stream, read by the ``scheduling-worker`` consumer group. duetime stores each as the timer
``notification:<id>`` (a redelivered or repeated event updates it; it never doubles) and
acknowledges the entry only after the timer is committed. At ``executionDate`` the worker
appends the notification — duetime's envelope, whose ``payload`` is the original event — to the
``delayed-notification-sender`` stream. Malformed events go to ``schedule-event:dead`` with the
reason.

The acceptance window (default 5 minutes) is where this differs from the seed. The seed's filter
dropped, silently, every event not due within "now .. now + 5 minutes" *when it arrived*: past
ones and far-future ones alike. Here every valid event is kept; the window only says how late a
notification may still be sent. One found due later than that (the worker was down, the event
arrived late) is recorded ``expired`` with the reason — visible in its history and metrics —
instead of being sent stale or vanishing.

The database comes from ``DUETIME_DATABASE_URL`` (default ``sqlite:///delayed_notifications.db``),
Redis from ``REDIS_URL`` (default ``redis://127.0.0.1:6379/0``).
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from datetime import timedelta

import duetime
from duetime.destinations import as_handler
from duetime.destinations.redis_stream import RedisStreamDestination
from duetime.sources import ScheduleCommand, run_worker_with_sources
from duetime.sources.base import NOTIFICATION_TYPE
from duetime.sources.redis_source import RedisSource

DATABASE_URL = os.environ.get("DUETIME_DATABASE_URL") or "sqlite:///delayed_notifications.db"
REDIS_URL = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
DELAYED_NOTIFICATION = NOTIFICATION_TYPE
"""The event type of a notification timer (``delayed-notification``)."""
ACCEPTANCE_WINDOW = timedelta(minutes=5)


@dataclass(frozen=True, slots=True)
class Topology:
    """The streams and the consumer group, named as the seed's Kafka topics were."""

    redis_url: str = REDIS_URL
    schedule_stream: str = "schedule-event"
    notification_stream: str = "delayed-notification-sender"
    group: str = "scheduling-worker"
    consumer: str | None = None
    """Default ``<host>-<pid>``; crashed consumers' entries are claimed after ``claim_idle``."""
    claim_idle: float = 60.0

    @property
    def dead_stream(self) -> str:
        return f"{self.schedule_stream}:dead"


class DelayedNotifications:
    """The worker: a Redis source of schedule-events, duetime, a Redis destination."""

    def __init__(
        self,
        database_url: str | None = None,
        *,
        topology: Topology | None = None,
        acceptance_window: timedelta | None = ACCEPTANCE_WINDOW,
        clock: duetime.Clock | None = None,
    ) -> None:
        self.topology = topology or Topology()
        self.app = duetime.AsyncApp(database_url or DATABASE_URL, clock=clock)
        self.destination = RedisStreamDestination(
            "notifications", self.topology.redis_url, self.topology.notification_stream
        )
        self.app.handler(DELAYED_NOTIFICATION)(as_handler(self.destination))
        self.source = RedisSource(
            self.app,
            self.topology.redis_url,
            self.topology.schedule_stream,
            command=ScheduleCommand.named("seed004", acceptance_window=acceptance_window),
            group=self.topology.group,
            consumer=self.topology.consumer,
            dead_stream=self.topology.dead_stream,
            claim_idle=self.topology.claim_idle,
            name="schedule-event",
        )

    async def run(self, stop: asyncio.Event) -> None:
        """Consume schedule-events and send due notifications until ``stop`` is set."""
        try:
            await run_worker_with_sources(self.app, [self.source], stop)
        finally:
            await self.destination.close()
            await self.app.close()

    async def expired(self) -> list[duetime.Timer]:
        """Notifications that were found too late to send: kept, with the reason, not dropped."""
        page = await self.app.history(status=duetime.Status.EXPIRED, limit=1000)
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
