"""The Kafka wiring, as the game service runs it: topic ``schedule-event`` in, consumer group
``scheduling-worker``, topic ``delayed-notification-sender`` out.

The notification is the schedule-event itself, as the game service published it (format
``payload``: the original Kafka Streams topology forwarded the value unchanged), keyed by
``userId`` so one user's notifications stay in order on one partition; duetime's fields travel
as ``Duetime-*`` headers, ``Duetime-Delivery-Id`` among them for the receiver to deduplicate on.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from duetime import AsyncApp
from duetime.destinations.kafka import KafkaDestination
from duetime.sources import ScheduleCommand
from duetime.sources.kafka_source import KafkaSource

KAFKA_BOOTSTRAP_SERVERS = os.environ.get("KAFKA_BOOTSTRAP_SERVERS") or "127.0.0.1:9092"


@dataclass(frozen=True, slots=True)
class KafkaTopology:
    """The topics and the consumer group the game service uses."""

    bootstrap_servers: str = KAFKA_BOOTSTRAP_SERVERS
    schedule_topic: str = "schedule-event"
    notification_topic: str = "delayed-notification-sender"
    group: str = "scheduling-worker"
    client_config: Mapping[str, str | int | float | bool] = field(default_factory=dict)
    """Extra librdkafka properties for both clients (e.g. Tansu's group settings)."""

    @property
    def dead_topic(self) -> str:
        return f"{self.schedule_topic}.dead"

    def describe(self) -> str:
        return (
            f"schedule-events on Kafka topic {self.schedule_topic} at {self.bootstrap_servers}, "
            f"notifications on {self.notification_topic}"
        )

    async def prepare(self) -> None:
        """Create the three topics if they do not exist (a broker may not auto-create them)."""
        await asyncio.to_thread(
            ensure_topics,
            self.bootstrap_servers,
            [self.schedule_topic, self.dead_topic, self.notification_topic],
        )

    def source(self, app: AsyncApp, command: ScheduleCommand) -> KafkaSource:
        return KafkaSource(
            app,
            self.bootstrap_servers,
            self.schedule_topic,
            command=command,
            group=self.group,
            dead_topic=self.dead_topic,
            name="schedule-event",
            client_config=dict(self.client_config),
        )

    def destination(self) -> KafkaDestination:
        return KafkaDestination(
            "notifications",
            self.bootstrap_servers,
            self.notification_topic,
            key="{subject}",
            format="payload",
            client_config=dict(self.client_config),
        )


def ensure_topics(servers: str, topics: list[str], timeout: float = 10.0) -> None:
    """Create ``topics`` (one partition each) unless they exist."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": servers})
    futures = admin.create_topics([NewTopic(topic, 1, 1) for topic in topics])
    for future in futures.values():
        try:
            future.result(timeout)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
