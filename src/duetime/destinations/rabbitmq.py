"""RabbitMQ: publish the envelope to an exchange and count it delivered on the broker's confirm.

Messages are persistent (``delivery_mode=2``), ``mandatory`` and sent on a channel with
publisher confirms: the broker acks only once a queue has the message (and, for durable queues,
has written it). Properties: ``message_id=<delivery_id>`` (dedupe on it),
``content_type=application/json``, ``type=<event type>``, ``correlation_id``, ``app_id=duetime``,
headers ``Duetime-Event-Type`` and ``Duetime-Attempt`` (and with tracing on ``traceparent``,
``tracestate``). The routing key is a template, by
default the event type (``"{type}"``), which suits a topic exchange.

A nack, a message the broker returns as unroutable (no queue bound for its routing key), an
exchange that does not exist, a timeout and a lost connection are all retryable failures: each
can be fixed on the broker's side while the delivery waits. The connection is opened on first
use and is a robust one (aio-pika reconnects and restores the channel by itself).
"""

from __future__ import annotations

import asyncio
import contextlib

import aio_pika
import aio_pika.abc
import aiormq.exceptions

from duetime.destinations.base import (
    Delivery,
    DeliveryFailed,
    SingleFlight,
    check_name,
    check_rate_limit,
    check_timeout,
    describe_error,
    render_template,
)
from duetime.destinations.config import (
    MAX_SHORTSTR,
    check_exchange,
    check_rabbitmq_url,
    check_routing_key,
)
from duetime.destinations.formats import Format, make_format
from duetime.support.redaction import redact_url
from duetime.timemath.ratelimit import Rate

DEFAULT_TIMEOUT = 10.0
DEFAULT_ROUTING_KEY = "{type}"

_CONNECTION_ERRORS = (aiormq.exceptions.AMQPError, ConnectionError, OSError, RuntimeError)


class RabbitMQDestination:
    """Publishes each delivery to one exchange over a robust connection opened on first use."""

    def __init__(
        self,
        name: str,
        url: str,
        exchange: str,
        *,
        routing_key: str = DEFAULT_ROUTING_KEY,
        timeout: float = DEFAULT_TIMEOUT,
        format: object = "duetime",
        ce_source: str | None = None,
        rate: str | Rate | None = None,
        burst: int | None = None,
    ) -> None:
        self.name = check_name(name)
        self.url = check_rabbitmq_url(url)
        self.format: Format = make_format(format, ce_source=ce_source)
        self.rate, self.burst = check_rate_limit(rate, burst)
        """This destination's own rate limit (None: none): a rule on its deliveries."""
        self.exchange = check_exchange(exchange)
        self.routing_key = check_routing_key(routing_key)
        self.timeout = check_timeout(timeout)
        self._connection: aio_pika.abc.AbstractRobustConnection | None = None
        self._channel: aio_pika.abc.AbstractChannel | None = None
        self._exchange: aio_pika.abc.AbstractExchange | None = None
        self._opening: SingleFlight[aio_pika.abc.AbstractExchange] = SingleFlight()

    def __repr__(self) -> str:
        return f"RabbitMQDestination({self.name!r}, {redact_url(self.url)!r}, {self.exchange!r})"

    async def deliver(self, delivery: Delivery) -> None:
        """Publish and wait for the broker's confirm; raise :class:`DeliveryFailed` otherwise."""
        event = delivery.event
        routing_key = render_template(self.routing_key, delivery)
        if len(routing_key.encode("utf-8")) > MAX_SHORTSTR:
            raise DeliveryFailed(f"routing key {routing_key[:60]!r}... is over 255 bytes", False)
        rendered = self.format.render(delivery, "amqp")
        message = aio_pika.Message(
            rendered.body,
            content_type=rendered.content_type,
            delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
            message_id=delivery.delivery_id,
            type=event.type,
            correlation_id=event.correlation_id,
            app_id="duetime",
            headers={
                **rendered.headers,
                "Duetime-Event-Type": event.type,
                "Duetime-Attempt": event.attempt,
                **delivery.trace_headers,
            },
        )
        target = f"exchange {self.exchange!r} with routing key {routing_key!r}"
        exchange = await self._ready_exchange()
        try:
            await exchange.publish(message, routing_key, mandatory=True, timeout=self.timeout)
        except aiormq.exceptions.PublishError as exc:  # returned: no queue bound for the key
            raise DeliveryFailed(f"unroutable: no queue is bound for {target}", True) from exc
        except aiormq.exceptions.DeliveryError as exc:  # nacked
            raise DeliveryFailed(
                f"the broker refused (nack) the message to {target}", True
            ) from exc
        except aiormq.exceptions.ChannelNotFoundEntity as exc:
            raise DeliveryFailed(
                f"exchange {self.exchange!r} does not exist: {describe_error(exc)}", True
            ) from exc
        except TimeoutError as exc:
            raise DeliveryFailed(
                f"no publisher confirm for {target} within {self.timeout:g}s", True
            ) from exc
        except _CONNECTION_ERRORS as exc:
            raise DeliveryFailed(
                f"publishing to {target} failed: {describe_error(exc)}", True
            ) from exc

    async def _ready_exchange(self) -> aio_pika.abc.AbstractExchange:
        exchange, channel = self._exchange, self._channel
        if exchange is not None and channel is not None and not channel.is_closed:
            return exchange
        try:
            return await self._opening.run(self._open)
        except (TimeoutError, *_CONNECTION_ERRORS) as exc:
            raise DeliveryFailed(
                f"cannot connect to RabbitMQ at {redact_url(self.url)}: {describe_error(exc)}", True
            ) from exc

    async def _open(self) -> aio_pika.abc.AbstractExchange:
        """Connect (unless connected) and open a confirming channel: once, for every waiter."""
        connection = self._connection
        if connection is None or connection.is_closed:
            connection = await aio_pika.connect_robust(self.url, timeout=self.timeout)
            self._connection = connection
        channel = await asyncio.wait_for(
            connection.channel(publisher_confirms=True, on_return_raises=True), self.timeout
        )
        # ensure=False: no passive declare, which would close the channel if the exchange is
        # missing; a publish to a missing exchange fails retryably instead.
        exchange = await channel.get_exchange(self.exchange, ensure=False)
        stale, self._channel, self._exchange = self._channel, channel, exchange
        if stale is not None and stale is not channel:
            # A robust channel the broker closed would reopen itself: close it for good instead,
            # or every such failure would leave one more channel open.
            with contextlib.suppress(Exception):
                await stale.close()
        return exchange

    async def close(self) -> None:
        """Close the channel and the connection; a later delivery reconnects."""
        await self._opening.cancel()
        connection, self._connection = self._connection, None
        self._channel = self._exchange = None
        if connection is not None and not connection.is_closed:
            await connection.close()
