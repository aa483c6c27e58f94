"""Kafka: produce each delivery to a topic and count it delivered when the broker acknowledged it.

The producer is idempotent (``enable.idempotence``) with ``acks=all``: a retry inside the client
never writes a record twice, and a record counts as delivered only once every in-sync replica
has it. A delivery is done when its delivery report arrives without an error; a timeout, a
broker that is down, a partition leader moving are retryable failures, a record too large or a
topic the credentials may not write to are not.

The record's key is the timer's key by default (``key: "{key}"``), so one subject's events stay
in order on one partition; it may be a template of ``{key}``, ``{subject}``, ``{namespace}``,
``{type}``, ``{correlation_id}``. The topic may use ``{namespace}`` and ``{type}``. Headers:
``Duetime-Delivery-Id`` (deduplicate on it: the same on every attempt), ``Duetime-Key``,
``Duetime-Attempt``, ``Duetime-Event-Type``, ``content-type``, whatever the ``format`` adds
(CloudEvents binary mode: ``ce_*``), the configured ``headers``, and with tracing on
``traceparent`` (and ``tracestate``).

The client is ``confluent-kafka`` (librdkafka). Its delivery reports arrive on a background
thread that polls the producer; each resolves the waiting delivery's future on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from duetime.destinations.base import (
    Delivery,
    DeliveryFailed,
    check_name,
    check_rate_limit,
    check_timeout,
    render_template,
)
from duetime.destinations.config import check_headers
from duetime.destinations.formats import Format, make_format
from duetime.destinations.kafka_options import (
    check_key_template,
    check_servers,
    check_topic,
    check_topic_template,
    client_config,
    record_key,
)
from duetime.errors import InvalidInput
from duetime.timemath.ratelimit import Rate

log = logging.getLogger("duetime.destinations.kafka")

DEFAULT_TIMEOUT = 10.0
DEFAULT_KEY = "{key}"

_PERMANENT = frozenset(
    {
        KafkaError.MSG_SIZE_TOO_LARGE,
        KafkaError.INVALID_MSG_SIZE,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.TOPIC_EXCEPTION,
        KafkaError.INVALID_RECORD,
        KafkaError._INVALID_ARG,
    }
)
"""Errors no retry can fix: the record or its topic is refused as it is."""


def failure(error: KafkaError, what: str) -> DeliveryFailed:
    """The DeliveryFailed a client error stands for: permanent or worth retrying."""
    # Most broker errors are transient (a leader moving, a timeout) even when librdkafka does
    # not flag them retriable; only the listed ones and fatal ones stop the retries.
    retryable = not (error.fatal() or error.code() in _PERMANENT)
    return DeliveryFailed(f"{what}: {error.str()}", retryable, error.name())


class KafkaDestination:
    """Produces each delivery to a Kafka topic through one idempotent producer."""

    def __init__(
        self,
        name: str,
        bootstrap_servers: str | Sequence[str],
        topic: str,
        *,
        key: str = DEFAULT_KEY,
        headers: Mapping[str, str] | None = None,
        format: object = "duetime",
        ce_source: str | None = None,
        rate: str | Rate | None = None,
        burst: int | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        env: Mapping[str, str] | None = None,
        **security: Any,
    ) -> None:
        self.name = check_name(name)
        self.servers = check_servers(
            bootstrap_servers if isinstance(bootstrap_servers, str) else list(bootstrap_servers)
        )
        self.topic = check_topic_template(topic)
        self.key = check_key_template(key)
        self.headers = check_headers(headers)
        self.format: Format = make_format(format, ce_source=ce_source)
        self.rate, self.burst = check_rate_limit(rate, burst)
        """This destination's own rate limit (None: none): a rule on its deliveries."""
        self.timeout = check_timeout(timeout)
        self.config: dict[str, Any] = {
            **client_config(self.servers, security, env, role="producer"),
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 2,
            "message.timeout.ms": int(self.timeout * 1000),
            "client.id": f"duetime-{self.name}",
        }
        self._producer: Producer | None = None
        self._polling: threading.Thread | None = None
        self._closing = threading.Event()

    def __repr__(self) -> str:
        return f"KafkaDestination({self.name!r}, {self.servers!r}, {self.topic!r})"

    async def deliver(self, delivery: Delivery) -> None:
        """Produce and wait for the broker's acknowledgement; raise DeliveryFailed otherwise."""
        event = delivery.event
        topic = render_template(self.topic, delivery)
        try:
            check_topic(topic)
        except InvalidInput as exc:
            raise DeliveryFailed(f"the topic renders as {topic!r}: {exc.message}", False) from exc
        message = self.format.render(delivery, "kafka")
        headers = {
            **self.headers,
            **message.headers,
            "content-type": message.content_type,
            "Duetime-Delivery-Id": delivery.delivery_id,
            **delivery.trace_headers,
            "Duetime-Key": event.key,
            "Duetime-Attempt": str(event.attempt),
            "Duetime-Event-Type": event.type,
        }
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def on_delivery(error: KafkaError | None, _: Message) -> None:
            loop.call_soon_threadsafe(_settle, done, error, topic)

        producer = self._ready()
        try:
            producer.produce(
                topic,
                message.body,
                record_key(self.key, delivery).encode("utf-8"),
                headers=[(k, v.encode("utf-8")) for k, v in headers.items()],
                on_delivery=on_delivery,
            )
        except BufferError as exc:
            raise DeliveryFailed("the producer's queue is full", True) from exc
        except KafkaException as exc:
            raise failure(exc.args[0], f"producing to {topic!r} failed") from exc
        try:
            await asyncio.wait_for(asyncio.shield(done), self.timeout + 1.0)
        except TimeoutError as exc:
            raise DeliveryFailed(
                f"no acknowledgement from Kafka for {topic!r} within {self.timeout:g}s", True
            ) from exc

    def _ready(self) -> Producer:
        if self._producer is None:
            self._closing.clear()
            producer = Producer({**self.config, "error_cb": self._on_error})
            self._producer = producer
            self._polling = threading.Thread(
                target=self._poll, args=(producer,), name=f"duetime-kafka-{self.name}", daemon=True
            )
            self._polling.start()
        return self._producer

    def _poll(self, producer: Producer) -> None:
        """Serve delivery reports until closed (they run on this thread)."""
        while not self._closing.is_set():
            producer.poll(0.05)

    def _on_error(self, error: KafkaError) -> None:
        log.warning("Kafka destination %s: %s", self.name, error.str())

    async def close(self) -> None:
        """Flush what is in flight (up to the timeout), then stop; a later delivery reopens."""
        producer, polling, self._producer, self._polling = self._producer, self._polling, None, None
        if producer is None:
            return
        await asyncio.to_thread(producer.flush, self.timeout)
        self._closing.set()
        if polling is not None:
            await asyncio.to_thread(polling.join)


def _settle(done: asyncio.Future[None], error: KafkaError | None, topic: str) -> None:
    if done.done():  # the deliverer gave up waiting
        return
    if error is None:
        done.set_result(None)
    else:
        done.set_exception(failure(error, f"Kafka did not take the record for {topic!r}"))
