"""Kafka client properties: each client gets only the settings that apply to it."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest

if not os.environ.get("CI"):
    pytest.importorskip("confluent_kafka", reason="the Kafka client comes with duetime[kafka]")

from confluent_kafka import Consumer, Producer

from duetime.destinations.kafka import KafkaDestination
from duetime.destinations.kafka_options import CONSUMER_ONLY, PRODUCER_ONLY, client_config
from duetime.sources.kafka_source import KafkaSource
from duetime.testing import make_app

EXTRA = {"session.timeout.ms": 3000, "linger.ms": 7, "socket.keepalive.enable": True}


def test_client_config_keeps_what_applies_to_the_role() -> None:
    servers = ["127.0.0.1:9092"]
    consumer = client_config(servers, {"client_config": EXTRA}, role="consumer")
    producer = client_config(servers, {"client_config": EXTRA}, role="producer")
    assert consumer == {
        "bootstrap.servers": "127.0.0.1:9092",
        "session.timeout.ms": 3000,
        "socket.keepalive.enable": True,
    }
    assert producer == {
        "bootstrap.servers": "127.0.0.1:9092",
        "linger.ms": 7,
        "socket.keepalive.enable": True,
    }
    assert not CONSUMER_ONLY & PRODUCER_ONLY


class Warnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def librdkafka_warnings(make: Any, config: dict[str, Any]) -> list[str]:
    """What librdkafka logs while a client is made from ``config`` (CONFWARN among it)."""
    logger = logging.getLogger(f"test.librdkafka.{id(config)}")
    handler = Warnings()
    logger.addHandler(handler)
    client = make({**config, "logger": logger})
    if isinstance(client, Producer):
        client.poll(0)  # serves the queued log lines
        client.flush(0)
    else:
        client.poll(0)
        client.close()
    return [line for line in handler.lines if "CONFWARN" in line or "property" in line]


def test_no_client_is_given_a_setting_librdkafka_would_ignore(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    source = KafkaSource(app, "127.0.0.1:1", "in", client_config=EXTRA)
    destination = KafkaDestination("out", "127.0.0.1:1", "out", client_config=EXTRA)
    assert librdkafka_warnings(Consumer, source.consumer_config) == []
    assert librdkafka_warnings(Producer, source.producer_config) == []
    assert librdkafka_warnings(Producer, destination.config) == []
    # the check can fail: the unfiltered settings do make librdkafka warn
    unfiltered = {"bootstrap.servers": "127.0.0.1:1", **EXTRA}
    assert librdkafka_warnings(Producer, unfiltered) != []
