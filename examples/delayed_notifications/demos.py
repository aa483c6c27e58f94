"""``--demo``: publish sample schedule-events, print what became of them, on either broker.

The events: one due in 2 s, one a minute late (sent at once), one ten minutes late (expired:
older than the 5-minute acceptance window), one 13 minutes ahead (kept; the original dropped it)
and one malformed (dead-lettered with the reason).
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

from redis.asyncio import Redis

from examples._demo import in_seconds
from examples.delayed_notifications.app import DelayedNotifications, schedule_event
from examples.delayed_notifications.on_kafka import KafkaTopology
from examples.delayed_notifications.on_redis import RedisTopology


def sample_events() -> list[dict[str, str]]:
    run = datetime.now(UTC).strftime("%H%M%S")
    return [
        schedule_event(f"{run}-soon", in_seconds(2)),
        schedule_event(f"{run}-late", in_seconds(-60)),
        schedule_event(f"{run}-stale", in_seconds(-600)),
        schedule_event(f"{run}-far", in_seconds(13 * 60)),
        {"id": f"{run}-broken", "userId": "user-789"},  # no executionDate
    ]


async def show_expired(service: DelayedNotifications) -> None:
    await asyncio.sleep(0.5)  # let the stale one be claimed and expired
    for timer in await service.expired():
        print(f"expired {timer.key}: {timer.last_error}", flush=True)


async def demo(service: DelayedNotifications) -> None:
    topology = service.topology
    if isinstance(topology, KafkaTopology):
        await demo_kafka(service, topology)
    else:
        assert isinstance(topology, RedisTopology)
        await demo_redis(service, topology)


async def demo_kafka(service: DelayedNotifications, topology: KafkaTopology) -> None:
    """Produce to ``schedule-event``; read ``delayed-notification-sender`` and the dead topic."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    await topology.prepare()
    servers = topology.bootstrap_servers
    reader = Consumer({"bootstrap.servers": servers, "group.id": "demo-reader"})
    try:
        tails = []
        for topic in (topology.notification_topic, topology.dead_topic):
            _, end = await asyncio.to_thread(reader.get_watermark_offsets, TopicPartition(topic, 0))
            tails.append(TopicPartition(topic, 0, end))
        reader.assign(tails)  # only what this run adds
        producer = Producer({"bootstrap.servers": servers, "enable.idempotence": True})
        for event in sample_events():
            producer.produce(topology.schedule_topic, json.dumps(event).encode(), event["id"])
            print(f"published schedule-event {json.dumps(event)}", flush=True)
        await asyncio.to_thread(producer.flush, 10)
        received, dead = 0, 0
        while received < 2 or dead < 1:
            for record in await asyncio.to_thread(reader.consume, 10, 0.5):
                if record.error() is not None:
                    continue
                if record.topic() == topology.dead_topic:
                    reason = dict(record.headers() or [])["duetime-dead-reason"].decode()
                    print(f"dead-lettered {record.value().decode()} reason: {reason}", flush=True)
                    dead += 1
                else:
                    print(f"notification {record.value().decode()}", flush=True)
                    received += 1
        await show_expired(service)
    finally:
        await asyncio.to_thread(reader.close)


async def demo_redis(service: DelayedNotifications, topology: RedisTopology) -> None:
    """Append to the ``schedule-event`` stream; read the notification and dead streams."""
    client = Redis.from_url(topology.redis_url)
    try:
        last: Any = await client.xrevrange(topology.notification_stream, count=1)
        seen = last[0][0] if last else b"0-0"
        for event in sample_events():
            await client.xadd(topology.schedule_stream, {"body": json.dumps(event)})
            print(f"published schedule-event {json.dumps(event)}", flush=True)
        received = 0
        while received < 2:
            reply: Any = await client.xread({topology.notification_stream: seen}, block=1000)
            for _, entries in reply or []:
                for entry_id, fields in entries:
                    seen = entry_id
                    envelope = json.loads(fields[b"envelope"])
                    print(f"notification {json.dumps(envelope['payload'])}", flush=True)
                    received += 1
        await show_expired(service)
        dead: Any = await client.xrevrange(topology.dead_stream, count=1)
        for _, fields in dead:
            reason = fields[b"dead_reason"].decode()
            print(f"dead-lettered {fields[b'body'].decode()} reason: {reason}", flush=True)
    finally:
        await client.aclose()
