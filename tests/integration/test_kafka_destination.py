"""The Kafka destination against a real broker, and the message formats it sends."""

from __future__ import annotations

import asyncio
import json
import os

import pytest

if not os.environ.get("CI"):
    pytest.importorskip("confluent_kafka", reason="the Kafka client comes with duetime[kafka]")

from kafka_broker import consume_all, create_topic, kafka_servers, unique_topic
from test_destinations import make_event

from duetime.destinations import Delivery, DestinationSpec, build_destination
from duetime.destinations.formats import make_format

__all__ = ["kafka_servers"]

SEED003 = {
    "id": "{delivery_id}",
    "type": "{type}",
    "tenantId": "{payload.tenantId}",
    "correlationId": "{correlation_id}",
    "timestampMs": "{sent_at_ms}",
    "payload": "{payload}",
}


def test_deliveries_are_acknowledged_keyed_and_carry_their_ids(kafka_servers: str) -> None:
    topic = unique_topic("delayed-notification-sender")
    create_topic(kafka_servers, topic)
    spec = DestinationSpec.from_dict(
        {"kind": "kafka", "bootstrap_servers": kafka_servers, "topic": topic, "name": "out"}
    )
    destination = build_destination(spec)
    event = make_event(key="notification:n1", payload={"id": "n1"}, attempt=2)

    async def main() -> None:
        try:
            await destination.deliver(Delivery.from_event(event, "out"))
        finally:
            await destination.close()

    asyncio.run(main())
    (record,) = consume_all(kafka_servers, topic, 1)
    headers = dict(record.headers())
    assert record.key() == b"notification:n1"
    assert headers["Duetime-Delivery-Id"] == f"{event.namespace}:notification:n1:out".encode()
    assert headers["Duetime-Attempt"] == b"2"
    assert json.loads(record.value())["payload"] == {"id": "n1"}


def test_cloudevents_binary_mode_uses_the_kafka_binding_headers(kafka_servers: str) -> None:
    topic = unique_topic("ce")
    create_topic(kafka_servers, topic)
    spec = DestinationSpec.from_dict(
        {
            "kind": "kafka",
            "bootstrap_servers": kafka_servers,
            "topic": topic,
            "format": "cloudevents-binary",
        },
        name="ce",
    )
    destination = build_destination(spec)

    async def main() -> None:
        try:
            await destination.deliver(Delivery.from_event(make_event(payload={"a": 1}), "ce"))
        finally:
            await destination.close()

    asyncio.run(main())
    (record,) = consume_all(kafka_servers, topic, 1)
    headers = dict(record.headers())
    assert json.loads(record.value()) == {"a": 1}
    assert headers["ce_specversion"] == b"1.0"
    assert headers["content-type"] == b"application/json"
    assert "ce_id" in headers
    assert "ce_type" in headers


def test_the_template_builds_the_service_call_envelope() -> None:
    template = make_format({"template": SEED003})
    event = make_event(
        type="DueTimeReached",
        payload={"tenantId": "t1", "serviceCallId": "c1"},
        correlation_id="corr-1",
    )
    body = json.loads(template.render(Delivery.from_event(event, "bus"), "nats").body)
    assert body["tenantId"] == "t1"
    assert body["type"] == "DueTimeReached"
    assert body["correlationId"] == "corr-1"
    assert body["payload"] == {"tenantId": "t1", "serviceCallId": "c1"}
    assert isinstance(body["timestampMs"], int)


def test_a_template_field_the_event_lacks_fails_for_good() -> None:
    from duetime.destinations import DeliveryFailed

    template = make_format({"template": SEED003})
    with pytest.raises(DeliveryFailed) as caught:
        template.render(Delivery.from_event(make_event(payload={}), "bus"), "http")
    assert not caught.value.retryable
    assert "payload.tenantId" in caught.value.message
