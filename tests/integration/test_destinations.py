"""Broker destinations against real NATS JetStream, Redis and RabbitMQ (see brokers.py).

Each test uses its own subject / stream / exchange, so runs never see each other's messages.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import pytest

if not os.environ.get("CI"):  # under CI a missing client library is an error, not a skip
    for client in ("nats", "redis", "aio_pika"):
        pytest.importorskip(client, reason="the broker clients come with duetime[brokers]")

import aio_pika
import nats
from brokers import closed_port, require_nats, require_rabbitmq, require_redis, with_port
from redis.asyncio import Redis
from tests.waiting import run as run_within

from duetime import Dead, Event, Retry
from duetime.destinations import (
    Delivery,
    DeliveryFailed,
    Destination,
    DestinationSpec,
    as_handler,
    build_destination,
    envelope,
)
from duetime.destinations.nats import NatsDestination
from duetime.destinations.rabbitmq import RabbitMQDestination
from duetime.destinations.redis_stream import RedisStreamDestination

DUE_AT = datetime(2025, 3, 15, 13, 0, tzinfo=UTC)


def make_event(**changes: Any) -> Event:
    values: dict[str, Any] = {
        "id": 42,
        "namespace": "shop",
        "key": "order-7",
        "type": "order.paid",
        "payload": {"order": 7, "note": "café"},
        "subject": "user-9",
        "due_at": DUE_AT,
        "attempt": 1,
        "max_attempts": 5,
        "correlation_id": "req-1",
        "fired_at": DUE_AT,
    }
    values.update(changes)
    return Event(**values)


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:10]}"


def run(main: Callable[[], Awaitable[None]]) -> None:
    run_within(main, 60)


async def failure_of(destination: Destination, delivery: Delivery) -> DeliveryFailed:
    with pytest.raises(DeliveryFailed) as caught:
        await destination.deliver(delivery)
    return caught.value


async def unreachable_then_reachable(spec: dict[str, Any], real_url: str) -> DeliveryFailed:
    """The same spec fails retryably on a closed port, then delivers on the real one."""
    down = build_destination(
        DestinationSpec.from_dict({**spec, "url": with_port(real_url, closed_port())}, name="d")
    )
    try:  # a refused connection fails at once (a hang would meet the test's timeout)
        failure = await failure_of(down, Delivery.from_event(make_event(), "d"))
    finally:
        await down.close()
    up = build_destination(DestinationSpec.from_dict({**spec, "url": real_url}, name="d"))
    try:
        await up.deliver(Delivery.from_event(make_event(), "d"))
    finally:
        await up.close()
    return failure


# -- NATS JetStream ---------------------------------------------------------------------------
def test_nats_publish_is_acked_stored_once_and_carries_nats_msg_id() -> None:
    url = require_nats()

    async def main() -> None:
        nc = await nats.connect(url)
        js = nc.jetstream()
        stream, prefix = unique("DT_"), unique("dt.test.")
        await js.add_stream(name=stream, subjects=[f"{prefix}.>"])
        destination = NatsDestination("bus", url, f"{prefix}.{{namespace}}.{{type}}")
        try:
            delivery = Delivery.from_event(make_event(), "bus")
            await destination.deliver(delivery)
            await destination.deliver(delivery)  # a retry after a lost ack...
            retry = Delivery.from_event(make_event(attempt=2), "bus")
            await destination.deliver(retry)  # ...or a later attempt: same Nats-Msg-Id
            info = await js.stream_info(stream)
            assert info.state.messages == 1

            other = Delivery.from_event(make_event(id=43, key="order-8"), "bus")
            await destination.deliver(other)
            assert (await js.stream_info(stream)).state.messages == 2

            subscription = await js.pull_subscribe(f"{prefix}.>", durable=None, stream=stream)
            first, second = await subscription.fetch(2, timeout=5)
            assert first.subject == f"{prefix}.shop.order.paid"
            assert json.loads(first.data) == envelope(delivery)
            assert first.headers is not None
            assert first.headers["Nats-Msg-Id"] == "shop:order-7:bus"
            assert first.headers["Duetime-Event-Type"] == "order.paid"
            assert first.headers["Duetime-Attempt"] == "1"
            assert first.headers["Content-Type"] == "application/json"
            assert second.headers is not None
            assert second.headers["Nats-Msg-Id"] == "shop:order-8:bus"
        finally:
            await destination.close()
            await js.delete_stream(stream)
            await nc.close()

    run(main)


def test_nats_subject_without_a_stream_is_retryable() -> None:
    url = require_nats()

    async def main() -> None:
        destination = NatsDestination("bus", url, unique("dt.nostream."), timeout=2)
        try:
            failure = await failure_of(destination, Delivery.from_event(make_event(), "bus"))
        finally:
            await destination.close()
        assert failure.retryable
        assert "no JetStream stream" in failure.message

    run(main)


def test_nats_unreachable_is_retryable_and_the_same_spec_then_delivers() -> None:
    url = require_nats()

    async def main() -> None:
        nc = await nats.connect(url)
        js = nc.jetstream()
        stream, subject = unique("DT_"), unique("dt.retry.")
        await js.add_stream(name=stream, subjects=[subject])
        try:
            spec = {"kind": "nats", "subject": subject, "timeout": 1}
            failure = await unreachable_then_reachable(spec, url)
            assert failure.retryable
            assert "cannot connect" in failure.message
            assert (await js.stream_info(stream)).state.messages == 1
        finally:
            await js.delete_stream(stream)
            await nc.close()

    run(main)


def test_nats_concurrent_deliveries_share_one_connection_attempt() -> None:
    require_nats()

    async def main() -> None:
        down = NatsDestination("bus", f"nats://127.0.0.1:{closed_port()}", "x.y", timeout=1)
        started = time.monotonic()
        results = await asyncio.gather(
            *(down.deliver(Delivery.from_event(make_event(id=i), "bus")) for i in range(20)),
            return_exceptions=True,
        )
        await down.close()
        assert time.monotonic() - started < 3  # one shared 1 s attempt, not twenty in turn
        assert all(isinstance(r, DeliveryFailed) and r.retryable for r in results)

    run(main)


# -- Redis streams ----------------------------------------------------------------------------
def test_redis_xadd_entry_has_the_fields_and_envelope() -> None:
    url = require_redis()

    async def main() -> None:
        stream = unique("duetime:test:")
        destination = RedisStreamDestination("audit", url, stream)
        client = Redis.from_url(url, decode_responses=True)
        try:
            delivery = Delivery.from_event(make_event(attempt=2), "audit")
            await destination.deliver(delivery)
            entries = await client.xrange(stream)
            assert entries is not None
            assert len(entries) == 1
            fields = entries[0][1]
            assert fields is not None
            assert fields["id"] == "42"
            assert fields["namespace"] == "shop"
            assert fields["type"] == "order.paid"
            assert fields["key"] == "order-7"
            assert fields["attempt"] == "2"
            assert fields["delivery_id"] == "shop:order-7:audit"
            assert json.loads(fields["envelope"]) == envelope(delivery)
        finally:
            await destination.close()
            await client.delete(stream)
            await client.aclose()

    run(main)


def test_redis_stream_template_and_maxlen_trimming() -> None:
    url = require_redis()

    async def main() -> None:
        prefix = unique("duetime:test:")
        destination = RedisStreamDestination("audit", url, prefix + ":{namespace}", maxlen=10)
        client = Redis.from_url(url)
        try:
            for i in range(300):
                await destination.deliver(Delivery.from_event(make_event(id=i), "audit"))
            length = await client.xlen(f"{prefix}:shop")
            assert 10 <= length < 300  # MAXLEN ~ trims whole nodes, so approximately
        finally:
            await destination.close()
            await client.delete(f"{prefix}:shop")
            await client.aclose()

    run(main)


def test_redis_key_of_another_type_is_not_retryable() -> None:
    url = require_redis()

    async def main() -> None:
        key = unique("duetime:test:")
        client = Redis.from_url(url)
        await client.set(key, "not a stream")
        destination = RedisStreamDestination("audit", url, key)
        try:
            failure = await failure_of(destination, Delivery.from_event(make_event(), "audit"))
        finally:
            await destination.close()
            await client.delete(key)
            await client.aclose()
        assert not failure.retryable
        assert failure.response is not None
        assert "WRONGTYPE" in failure.response

    run(main)


def test_redis_unreachable_is_retryable_and_the_same_spec_then_delivers() -> None:
    url = require_redis()

    async def main() -> None:
        stream = unique("duetime:test:")
        client = Redis.from_url(url)
        try:
            spec = {"kind": "redis", "stream": stream, "timeout": 1}
            failure = await unreachable_then_reachable(spec, url)
            assert failure.retryable
            assert await client.xlen(stream) == 1
        finally:
            await client.delete(stream)
            await client.aclose()

    run(main)


# -- RabbitMQ ---------------------------------------------------------------------------------
async def rabbit_queue(
    url: str, *, bind: str | None = "#", arguments: dict[str, Any] | None = None
) -> tuple[aio_pika.abc.AbstractConnection, str, aio_pika.abc.AbstractQueue]:
    """A unique topic exchange and (when ``bind``) an exclusive queue bound to it."""
    connection = await aio_pika.connect(url)
    channel = await connection.channel()
    name = unique("duetime.test.")
    exchange = await channel.declare_exchange(name, aio_pika.ExchangeType.TOPIC, auto_delete=True)
    queue = await channel.declare_queue(exclusive=True, arguments=arguments)
    if bind is not None:
        await queue.bind(exchange, bind)
    return connection, name, queue


def test_rabbitmq_message_is_confirmed_persistent_and_carries_message_id() -> None:
    url = require_rabbitmq()

    async def main() -> None:
        connection, exchange, queue = await rabbit_queue(url, bind="shop.order.*")
        destination = RabbitMQDestination("orders", url, exchange, routing_key="{namespace}.{type}")
        try:
            delivery = Delivery.from_event(make_event(attempt=3), "orders")
            await destination.deliver(delivery)
            message = await queue.get(timeout=5)
            assert message is not None
            await message.ack()
            assert message.routing_key == "shop.order.paid"
            assert message.message_id == "shop:order-7:orders"
            assert message.delivery_mode == aio_pika.DeliveryMode.PERSISTENT
            assert message.content_type == "application/json"
            assert message.type == "order.paid"
            assert message.correlation_id == "req-1"
            assert message.app_id == "duetime"
            assert message.headers["Duetime-Attempt"] == 3
            assert message.headers["Duetime-Event-Type"] == "order.paid"
            assert json.loads(message.body) == envelope(delivery)
        finally:
            await destination.close()
            await connection.close()

    run(main)


def test_rabbitmq_unroutable_message_is_retryable() -> None:
    url = require_rabbitmq()

    async def main() -> None:
        connection, exchange, _ = await rabbit_queue(url, bind=None)
        destination = RabbitMQDestination("orders", url, exchange)
        try:
            failure = await failure_of(destination, Delivery.from_event(make_event(), "orders"))
        finally:
            await destination.close()
            await connection.close()
        assert failure.retryable
        assert "unroutable" in failure.message

    run(main)


def test_rabbitmq_nack_is_retryable() -> None:
    url = require_rabbitmq()

    async def main() -> None:
        full = {"x-max-length": 1, "x-overflow": "reject-publish"}
        connection, exchange, _queue = await rabbit_queue(url, arguments=full)
        destination = RabbitMQDestination("orders", url, exchange)
        try:
            await destination.deliver(Delivery.from_event(make_event(id=1), "orders"))
            failure = await failure_of(destination, Delivery.from_event(make_event(id=2), "orders"))
            assert failure.retryable
            assert "nack" in failure.message
        finally:
            await destination.close()
            await connection.close()

    run(main)


def test_rabbitmq_missing_exchange_is_retryable_and_recovers_once_declared() -> None:
    url = require_rabbitmq()

    async def main() -> None:
        name = unique("duetime.test.")
        destination = RabbitMQDestination("orders", url, name)
        connection = await aio_pika.connect(url)
        try:
            for _ in range(3):  # each failure closes the channel; none may leak or wedge it
                failure = await failure_of(destination, Delivery.from_event(make_event(), "orders"))
                assert failure.retryable
                assert "does not exist" in failure.message
            channel = await connection.channel()
            exchange = await channel.declare_exchange(name, aio_pika.ExchangeType.TOPIC)
            queue = await channel.declare_queue(exclusive=True)
            await queue.bind(exchange, "#")
            await destination.deliver(Delivery.from_event(make_event(), "orders"))
            assert await queue.get(timeout=5) is not None
            await exchange.delete()
        finally:
            await destination.close()
            await connection.close()

    run(main)


def test_rabbitmq_unreachable_is_retryable_and_the_same_spec_then_delivers() -> None:
    url = require_rabbitmq()

    async def main() -> None:
        connection, exchange, queue = await rabbit_queue(url)
        try:
            spec = {"kind": "rabbitmq", "exchange": exchange, "timeout": 2}
            failure = await unreachable_then_reachable(spec, url)
            assert failure.retryable
            assert "cannot connect" in failure.message
            message = await queue.get(timeout=5)
            assert message is not None
            assert message.message_id == "shop:order-7:d"
        finally:
            await connection.close()

    run(main)


# -- the handler adapter over a broker --------------------------------------------------------
def test_as_handler_over_a_broker_maps_retryable_to_retry_and_permanent_to_dead() -> None:
    url = require_redis()

    async def main() -> None:
        key = unique("duetime:test:")
        client = Redis.from_url(url)
        await client.set(key, "not a stream")
        wrong_type = RedisStreamDestination("audit", url, key)
        down = RedisStreamDestination("audit", with_port(url, closed_port()), key, timeout=1)
        try:
            with pytest.raises(Dead, match="WRONGTYPE"):
                await as_handler(wrong_type)(make_event())
            with pytest.raises(Retry) as retry:
                await as_handler(down)(make_event())
            assert retry.value.delay is None  # no hint: the backoff policy decides
        finally:
            await wrong_type.close()
            await down.close()
            await client.delete(key)
            await client.aclose()

    run(main)
