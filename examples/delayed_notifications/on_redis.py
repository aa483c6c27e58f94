"""The Redis Streams wiring: a consumer group on ``schedule-event``, entries appended out."""

from __future__ import annotations

import os
from dataclasses import dataclass

from duetime import AsyncApp
from duetime.destinations.redis_stream import RedisStreamDestination
from duetime.sources import ScheduleCommand
from duetime.sources.redis_source import RedisSource

REDIS_URL = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"


@dataclass(frozen=True, slots=True)
class RedisTopology:
    """The streams and the consumer group, named as the original Kafka topics were."""

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

    def describe(self) -> str:
        return (
            f"schedule-events on Redis stream {self.schedule_stream}, "
            f"notifications on {self.notification_stream}"
        )

    async def prepare(self) -> None:
        """Nothing to create: the group is made with ``MKSTREAM``, streams on first append."""

    def source(self, app: AsyncApp, command: ScheduleCommand) -> RedisSource:
        return RedisSource(
            app,
            self.redis_url,
            self.schedule_stream,
            command=command,
            group=self.group,
            consumer=self.consumer,
            dead_stream=self.dead_stream,
            claim_idle=self.claim_idle,
            name="schedule-event",
        )

    def destination(self) -> RedisStreamDestination:
        """Entries with duetime's envelope (field ``envelope``), whose payload is the event."""
        return RedisStreamDestination("notifications", self.redis_url, self.notification_stream)
