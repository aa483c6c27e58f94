"""A Kafka broker for the tests: ``DUETIME_TEST_KAFKA`` (a real Kafka), else a private Tansu.

The Tansu (:mod:`duetime.testing.tansu`) is started once per session. When neither is
available the test is skipped with the reason, or fails under ``CI``.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from brokers import _unavailable

from duetime.testing.tansu import GROUP_CONFIG, TansuUnavailable, tansu


def group_config() -> dict[str, object]:
    """Consumer-group settings for the test broker: Tansu's :data:`GROUP_CONFIG`, or none
    for a real Kafka (``DUETIME_TEST_KAFKA``), which keeps the defaults."""
    if os.environ.get("DUETIME_TEST_KAFKA"):
        return {}
    return dict(GROUP_CONFIG)


@pytest.fixture(scope="session")
def kafka_servers() -> Iterator[str]:
    """``host:port`` of a Kafka broker for this session."""
    external = os.environ.get("DUETIME_TEST_KAFKA")
    if external:
        yield external
        return
    try:
        with tansu() as servers:
            yield servers
    except TansuUnavailable as exc:  # raised only while starting
        _unavailable("Kafka", "DUETIME_TEST_KAFKA", f"unset, and {exc}")


def unique_topic(prefix: str) -> str:
    """A topic no other test uses (the broker lives for the whole session)."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def create_topic(servers: str, topic: str, partitions: int = 1) -> None:
    """Create ``topic`` with ``partitions`` partitions and wait until it exists."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": servers})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(10)


def produce(
    servers: str,
    topic: str,
    values: list[bytes],
    *,
    key: bytes | None = None,
    headers: list[tuple[str, bytes]] | None = None,
    partition: int | None = None,
) -> None:
    """Produce ``values`` in order and wait for every acknowledgement."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": servers, "enable.idempotence": True, "acks": "all"})
    errors: list[object] = []
    for value in values:
        extra = {} if partition is None else {"partition": partition}
        producer.produce(
            topic,
            value,
            key,
            headers=headers,
            on_delivery=lambda e, m: errors.append(e) if e else None,
            **extra,
        )
    assert producer.flush(10) == 0
    assert not errors, errors


def consume_all(servers: str, topic: str, count: int, timeout: float = 10.0) -> list[Any]:
    """Read ``count`` records from the start of every partition of ``topic``, or fail."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": servers, "group.id": "reader", "enable.auto.commit": False}
    )
    records: list[Any] = []
    deadline = time.monotonic() + timeout
    try:
        partitions: Any = {}
        while not partitions and time.monotonic() < deadline:
            metadata = consumer.list_topics(topic, timeout=5).topics.get(topic)
            partitions = metadata.partitions if metadata and not metadata.error else {}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        while len(records) < count and time.monotonic() < deadline:
            for message in consumer.consume(count - len(records), 0.5):
                if message.error() is None:
                    records.append(message)
    finally:
        consumer.close()
    assert len(records) >= count, f"read {len(records)} of {count} records from {topic}"
    return sorted(records, key=lambda m: (m.partition(), m.offset()))


def committed(servers: str, topic: str, group: str, partitions: int = 1) -> list[int]:
    """The offsets ``group`` has committed on each partition of ``topic``."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": servers, "group.id": group})
    try:
        offsets = consumer.committed(
            [TopicPartition(topic, p) for p in range(partitions)], timeout=10
        )
    finally:
        consumer.close()
    return [tp.offset for tp in offsets]
