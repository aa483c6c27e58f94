"""Redis streams: XADD each delivery as one entry, for consumer groups to read at their own pace.

Entry fields (all strings)::

    id           the timer's id            type      the event type
    key          the caller's key          attempt   1, 2, ...
    namespace    the namespace             delivery_id  "<namespace>:<id>:<destination>"
    envelope     the JSON envelope (see duetime.destinations.base); with another ``format``
                 the field is ``body`` and holds that format's message
    content_type application/json (application/cloudevents+json for ``cloudevents``)
    traceparent  the W3C trace context of the delivery's span, when tracing is on (and
    tracestate   tracestate when the trace has one): absent otherwise

Redis has no server-side deduplication for streams (before Redis 8.2's IDMP), so a retry whose
first XADD succeeded but whose reply was lost adds a second entry: consumers dedupe on
``delivery_id``. ``maxlen`` trims the stream approximately (``MAXLEN ~``), which is cheap.
The stream name may be a template: ``"events:{namespace}"``.

Connection errors, timeouts and transient server states (loading, read-only replica, out of
memory) are retryable; a key holding another type (``WRONGTYPE``) is not.
"""

from __future__ import annotations

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError, ResponseError
from redis.typing import EncodableT, FieldT

from duetime.destinations.base import (
    Delivery,
    DeliveryFailed,
    check_name,
    check_rate_limit,
    check_timeout,
    describe_error,
    render_template,
)
from duetime.destinations.config import check_maxlen, check_redis_url, check_stream
from duetime.destinations.formats import CloudEventsFormat, Format, make_format
from duetime.errors import InvalidInput
from duetime.support.redaction import redact_url
from duetime.timemath.ratelimit import Rate

DEFAULT_TIMEOUT = 5.0


class RedisStreamDestination:
    """Appends each delivery to a Redis stream over a pooled connection opened on first use."""

    def __init__(
        self,
        name: str,
        url: str,
        stream: str,
        *,
        maxlen: int | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        format: object = "duetime",
        ce_source: str | None = None,
        rate: str | Rate | None = None,
        burst: int | None = None,
    ) -> None:
        self.name = check_name(name)
        self.url = check_redis_url(url)
        self.stream = check_stream(stream)
        self.maxlen = check_maxlen(maxlen)
        self.timeout = check_timeout(timeout)
        self.format: Format = make_format(format, ce_source=ce_source)
        self.rate, self.burst = check_rate_limit(rate, burst)
        """This destination's own rate limit (None: none): a rule on its deliveries."""
        if isinstance(self.format, CloudEventsFormat) and self.format.binary:
            raise InvalidInput(
                "format", "Redis streams have no CloudEvents binary mode; use 'cloudevents'"
            )
        self._body_field = "envelope" if self.format.name == "duetime" else "body"
        self._client: Redis | None = None

    def __repr__(self) -> str:
        return f"RedisStreamDestination({self.name!r}, {redact_url(self.url)!r}, {self.stream!r})"

    async def deliver(self, delivery: Delivery) -> None:
        """XADD the entry; raise :class:`DeliveryFailed` if Redis did not store it."""
        event = delivery.event
        stream = render_template(self.stream, delivery)
        fields: dict[FieldT, EncodableT] = {
            "id": str(event.id),
            "namespace": event.namespace,
            "type": event.type,
            "key": event.key,
            "attempt": str(event.attempt),
            "delivery_id": delivery.delivery_id,
        }
        fields.update(delivery.trace_headers)
        message = self.format.render(delivery, "redis")
        fields["content_type"] = message.content_type
        fields[self._body_field] = message.body
        try:
            await self._redis().xadd(stream, fields, maxlen=self.maxlen, approximate=True)
        except ResponseError as exc:
            permanent = str(exc).startswith("WRONGTYPE")
            raise DeliveryFailed(
                f"Redis refused XADD to {stream!r}: {exc}", not permanent, str(exc)
            ) from exc
        except (RedisError, OSError, TimeoutError) as exc:
            raise DeliveryFailed(
                f"XADD to {stream!r} at {redact_url(self.url)} failed: {describe_error(exc)}", True
            ) from exc

    def _redis(self) -> Redis:
        if self._client is None:
            self._client = Redis.from_url(
                self.url,
                socket_timeout=self.timeout,
                socket_connect_timeout=self.timeout,
                # One immediate retry replaces a pooled connection the server dropped; anything
                # longer is the worker's job, with backoff.
                retry=Retry(NoBackoff(), 1),
            )
        return self._client

    async def close(self) -> None:
        """Close the connection pool; a later delivery opens a new one."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()
