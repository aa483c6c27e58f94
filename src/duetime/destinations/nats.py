"""NATS JetStream: publish the envelope to a subject and count it delivered on the stream's ack.

Each message carries ``Nats-Msg-Id: <delivery_id>``, so when a retry re-sends a delivery whose
first publish was stored but whose ack was lost, JetStream's duplicate window (``duplicate_window``
on the stream, 2 minutes by default) drops the copy. Redeliveries further apart than the window
are stored twice; consumers that must not see a duplicate dedupe on the header themselves.

Headers: ``Nats-Msg-Id``, ``Content-Type: application/json``, ``Duetime-Event-Type``,
``Duetime-Attempt``, and with tracing on ``traceparent`` (and ``tracestate``). The subject may
be a template: ``"events.{namespace}.{type}"``.

Delivered means the JetStream PubAck arrived: the stream has persisted the message. No stream
capturing the subject, a timeout, or a lost connection are retryable failures. The connection is
opened on first use; once open, nats-py reconnects by itself (deliveries fail retryably while it
does), and :meth:`NatsDestination.close` drains it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

import nats
import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.js import JetStreamContext

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
from duetime.destinations.config import check_nats_urls, check_path, check_subject
from duetime.destinations.formats import Format, make_format
from duetime.support.redaction import redact_url
from duetime.timemath.ratelimit import Rate

log = logging.getLogger("duetime.destinations.nats")

DEFAULT_TIMEOUT = 5.0


class NatsDestination:
    """Publishes each delivery to a JetStream subject over one lazily opened connection."""

    def __init__(
        self,
        name: str,
        url: str | Sequence[str],
        subject: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        credentials: str | None = None,
        format: object = "duetime",
        ce_source: str | None = None,
        rate: str | Rate | None = None,
        burst: int | None = None,
    ) -> None:
        self.name = check_name(name)
        self.servers = check_nats_urls(url if isinstance(url, str) else list(url))
        self.subject = check_subject(subject)
        self.timeout = check_timeout(timeout)
        self.credentials = None if credentials is None else check_path(credentials, "credentials")
        self.format: Format = make_format(format, ce_source=ce_source)
        self.rate, self.burst = check_rate_limit(rate, burst)
        """This destination's own rate limit (None: none): a rule on its deliveries."""
        self._nc: Client | None = None
        self._js: JetStreamContext | None = None
        self._connecting: SingleFlight[Client] = SingleFlight()
        self._connect_error: str | None = None

    def __repr__(self) -> str:
        servers = ", ".join(redact_url(s) for s in self.servers)
        return f"NatsDestination({self.name!r}, [{servers}], {self.subject!r})"

    async def deliver(self, delivery: Delivery) -> None:
        """Publish and wait for the PubAck; raise :class:`DeliveryFailed` otherwise."""
        message = self.format.render(delivery, "nats")
        body = message.body
        subject = render_template(self.subject, delivery)
        headers = {
            **message.headers,
            "Nats-Msg-Id": delivery.delivery_id,
            "Content-Type": message.content_type,
            "Duetime-Event-Type": delivery.event.type,
            "Duetime-Attempt": str(delivery.event.attempt),
            **delivery.trace_headers,
        }
        js = await self._jetstream()
        try:
            ack = await js.publish(subject, body, timeout=self.timeout, headers=headers)
        except nats.js.errors.NoStreamResponseError as exc:
            raise DeliveryFailed(f"no JetStream stream captures subject {subject!r}", True) from exc
        except (nats.errors.MaxPayloadError, nats.errors.BadSubjectError) as exc:
            raise DeliveryFailed(
                f"NATS refused the message for {subject!r}: {describe_error(exc)}", False
            ) from exc
        except nats.js.errors.APIError as exc:
            raise DeliveryFailed(
                f"JetStream refused {subject!r}: {describe_error(exc)}", True
            ) from exc
        except TimeoutError as exc:
            raise DeliveryFailed(
                f"no JetStream ack for {subject!r} within {self.timeout:g}s", True
            ) from exc
        except (nats.errors.Error, OSError) as exc:
            raise DeliveryFailed(
                f"publishing to {subject!r} failed: {describe_error(exc)}", True
            ) from exc
        if ack.duplicate:
            log.debug("JetStream already had %s (stream %s)", delivery.delivery_id, ack.stream)

    async def _jetstream(self) -> JetStreamContext:
        nc = self._nc
        if nc is None or nc.is_closed:
            nc = await self._connection()
        if not nc.is_connected:
            raise DeliveryFailed("not connected to NATS (reconnecting)", True)
        if self._js is None:
            self._js = nc.jetstream(timeout=self.timeout)
        return self._js

    async def _connection(self) -> Client:
        try:
            return await self._connecting.run(self._connect)
        except (TimeoutError, nats.errors.Error, OSError) as exc:
            servers = ", ".join(redact_url(s) for s in self.servers)
            cause = describe_error(exc)
            if isinstance(exc, TimeoutError) and self._connect_error is not None:
                cause = f"no connection within {self.timeout:g}s; last error: {self._connect_error}"
            raise DeliveryFailed(f"cannot connect to NATS at {servers}: {cause}", True) from exc

    async def _connect(self) -> Client:
        nc = Client()
        self._connect_error = None

        async def on_error(exc: Exception) -> None:
            if nc is self._nc:
                log.warning("NATS destination %s: %s", self.name, describe_error(exc))
            else:  # still connecting: the failed delivery reports it
                self._connect_error = describe_error(exc)

        async def on_disconnected() -> None:
            if nc is self._nc:
                log.warning("NATS destination %s: disconnected; reconnecting", self.name)

        async def on_reconnected() -> None:
            log.info("NATS destination %s: reconnected", self.name)

        try:
            # Once connected, nats-py reconnects forever on its own; the first connection is
            # bounded by the timeout so a delivery to a server that is down fails in bounded time.
            await asyncio.wait_for(
                nc.connect(
                    servers=self.servers,
                    name=f"duetime:{self.name}",
                    connect_timeout=max(1, round(self.timeout)),
                    max_reconnect_attempts=-1,
                    reconnect_time_wait=1,
                    user_credentials=self.credentials,
                    error_cb=on_error,
                    disconnected_cb=on_disconnected,
                    reconnected_cb=on_reconnected,
                ),
                self.timeout,
            )
        except BaseException:
            with contextlib.suppress(Exception):
                await nc.close()
            raise
        self._nc, self._js = nc, None
        return nc

    async def close(self) -> None:
        """Drain: wait for in-flight publishes, then close; a later delivery reconnects."""
        await self._connecting.cancel()
        nc, self._nc, self._js = self._nc, None, None
        if nc is None or nc.is_closed:
            return
        try:
            await nc.drain()
        except (nats.errors.Error, OSError, TimeoutError):
            await nc.close()
