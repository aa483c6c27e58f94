"""Webhooks: POST the envelope to a URL, signed, so receivers can trust it and drop redeliveries.

What is sent
------------
``POST <url>`` with the JSON envelope (see :mod:`duetime.destinations.base`) as the body and::

    Content-Type: application/json
    Idempotency-Key: <delivery_id>          same on every attempt: deduplicate on it
    Duetime-Event-Type: <type>
    Duetime-Attempt: <attempt>
    traceparent: <W3C trace context>        with tracing on (and tracestate when there is one)
    Duetime-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>   (when a secret is configured)

The signature is Stripe's scheme: ``v1`` is the hex HMAC-SHA256, keyed with the shared secret, of
``f"{t}.".encode() + body`` — the timestamp, a dot and the exact body bytes. Signing the
timestamp lets receivers refuse replays of old requests.

Verifying, on the receiving side
--------------------------------
Use :func:`verify_signature` on the *raw* body (before any JSON parsing)::

    from duetime.destinations.webhook import verify_signature

    if not verify_signature(SECRET, request.headers["Duetime-Signature"], raw_body, time.time()):
        return 400

It compares in constant time, accepts any of several ``v1`` values (so a sender may sign with an
old and a new secret while rotating), and refuses timestamps more than ``tolerance`` seconds
(default 300) from ``now`` in either direction.

How answers are read
--------------------
- 2xx: delivered.
- 408, 429, 5xx, timeouts, connection errors: retryable; a ``Retry-After`` header (seconds or an
  HTTP date) becomes ``DeliveryFailed.retry_after``, capped at :data:`MAX_RETRY_AFTER`.
- any other status (3xx — redirects are not followed — and 4xx): not retryable; the status and
  the first 500 bytes of the body are recorded, and the delivery goes to the dead-letter queue.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import importlib.metadata
import time
from collections.abc import Callable, Mapping
from datetime import UTC
from email.utils import parsedate_to_datetime

import httpx

from duetime.destinations.base import (
    RESPONSE_LIMIT,
    Delivery,
    DeliveryFailed,
    check_name,
    check_rate_limit,
    check_timeout,
    describe_error,
    url_origin,
)
from duetime.destinations.config import check_headers, check_secret, check_webhook_url
from duetime.destinations.formats import Format, make_format
from duetime.timemath.ratelimit import Rate

DEFAULT_TIMEOUT = 10.0
DEFAULT_TOLERANCE = 300.0
MAX_RETRY_AFTER = 3600.0
"""A receiver's ``Retry-After`` is honoured up to an hour; longer waits use the backoff policy."""

SIGNATURE_HEADER = "Duetime-Signature"
RETRYABLE_STATUSES = frozenset({408, 429})


def sign(secret: str | bytes, timestamp: int, body: bytes) -> str:
    """The ``Duetime-Signature`` header value for ``body`` sent at ``timestamp``."""
    return f"t={timestamp},v1={_digest(secret, timestamp, body)}"


def verify_signature(
    secret: str | bytes,
    header: str | None,
    body: bytes | str,
    now: float,
    tolerance: float = DEFAULT_TOLERANCE,
) -> bool:
    """Whether ``header`` signs ``body`` with ``secret`` at a time within ``tolerance`` of ``now``.

    Pure and never raises: a missing or malformed header is simply not valid.
    """
    if not header:
        return False
    timestamp: int | None = None
    candidates: list[bytes] = []
    for item in header.split(","):
        name, sep, value = item.strip().partition("=")
        if not sep:
            continue
        if name == "t" and value.isascii() and value.isdigit():
            timestamp = int(value)
        elif name == "v1":
            candidates.append(value.encode("utf-8", "replace"))
    if timestamp is None or not candidates or abs(now - timestamp) > tolerance:
        return False
    raw = body.encode("utf-8") if isinstance(body, str) else body
    expected = _digest(secret, timestamp, raw).encode("ascii")
    matched = False
    for candidate in candidates:  # compare against every candidate: no early exit to time
        matched |= hmac.compare_digest(expected, candidate)
    return matched


def _digest(secret: str | bytes, timestamp: int, body: bytes) -> str:
    key = secret.encode("utf-8") if isinstance(secret, str) else secret
    return hmac.new(key, f"{timestamp}.".encode("ascii") + body, hashlib.sha256).hexdigest()


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or HTTP date), or None."""
    if value is None:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        seconds = float(value)
    else:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = when.timestamp() - now
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)


class WebhookDestination:
    """POSTs each delivery to one URL over a pooled HTTP client; see the module docstring."""

    def __init__(
        self,
        name: str,
        url: str,
        *,
        secret: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        headers: Mapping[str, str] | None = None,
        format: object = "duetime",
        ce_source: str | None = None,
        rate: str | Rate | None = None,
        burst: int | None = None,
        clock: Callable[[], float] = time.time,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.name = check_name(name)
        self.url = check_webhook_url(url)
        self.shown_url = url_origin(self.url)
        """The URL as errors and logs show it: without credentials, path or query."""
        self.secret = check_secret(secret)
        self.timeout = check_timeout(timeout)
        self.headers = check_headers(headers)
        self.format: Format = make_format(format, ce_source=ce_source)
        self.rate, self.burst = check_rate_limit(rate, burst)
        """This destination's own rate limit (None: none): a rule on its deliveries."""
        self._clock = clock
        self._transport = transport
        self._client: httpx.AsyncClient | None = None

    def __repr__(self) -> str:
        return f"WebhookDestination({self.name!r}, {self.shown_url!r})"

    async def deliver(self, delivery: Delivery) -> None:
        """POST the message; return on 2xx, raise :class:`DeliveryFailed` otherwise."""
        message = self.format.render(delivery, "http")
        body = message.body
        headers = {
            **self.headers,
            **message.headers,
            "Content-Type": message.content_type,
            "Idempotency-Key": delivery.delivery_id,
            "Duetime-Event-Type": delivery.event.type,
            "Duetime-Attempt": str(delivery.event.attempt),
            **delivery.trace_headers,
        }
        if self.secret is not None:
            headers[SIGNATURE_HEADER] = sign(self.secret, int(self._clock()), body)
        client = self._client_for_use()
        request = client.build_request("POST", self.url, content=body, headers=headers)
        try:
            # httpx's timeout bounds each phase (connect, write, each read); this bounds the
            # whole exchange, so a receiver trickling bytes cannot hold the delivery forever.
            async with asyncio.timeout(self.timeout):
                response = await client.send(request, stream=True)
        except (TimeoutError, httpx.TimeoutException) as exc:
            what = type(exc).__name__
            raise DeliveryFailed(
                f"POST {self.shown_url} timed out after {self.timeout:g}s ({what})", True
            ) from exc
        except httpx.TransportError as exc:
            raise DeliveryFailed(
                f"POST {self.shown_url} failed: {describe_error(exc)}", True
            ) from exc
        try:
            if response.is_success:
                return
            try:
                async with asyncio.timeout(self.timeout):
                    snippet = await _read_prefix(response)
            except TimeoutError:
                snippet = f"(body not read within {self.timeout:g}s)"
        finally:
            await response.aclose()
        raise self._refused(response, snippet)

    def _refused(self, response: httpx.Response, snippet: str) -> DeliveryFailed:
        status = response.status_code
        recorded = f"HTTP {status} {response.reason_phrase}".rstrip()
        if snippet:
            recorded += f": {snippet}"
        if status in RETRYABLE_STATUSES or status >= 500:
            retry_after = parse_retry_after(response.headers.get("Retry-After"), self._clock())
            return DeliveryFailed(
                f"POST {self.shown_url} answered {status}", True, recorded, retry_after=retry_after
            )
        hint = " (redirects are not followed: configure the final URL)" if status < 400 else ""
        return DeliveryFailed(f"POST {self.shown_url} answered {status}{hint}", False, recorded)

    def _client_for_use(self) -> httpx.AsyncClient:
        if self._client is None or self._client.is_closed:
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(self.timeout),
                follow_redirects=False,
                headers={"User-Agent": _user_agent()},
                limits=httpx.Limits(max_connections=100, max_keepalive_connections=20),
                transport=self._transport,
            )
        return self._client

    async def close(self) -> None:
        """Close pooled connections; a later delivery opens a new pool."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


async def _read_prefix(response: httpx.Response) -> str:
    """The first bytes of the body, without downloading a huge error page."""
    data = b""
    try:
        async for chunk in response.aiter_bytes():
            data += chunk
            if len(data) >= RESPONSE_LIMIT:
                break
    except httpx.HTTPError as exc:
        if not data:
            return f"(body unreadable: {describe_error(exc)})"
    return data[:RESPONSE_LIMIT].decode("utf-8", "replace")


def _user_agent() -> str:
    try:
        return f"duetime/{importlib.metadata.version('duetime')}"
    except importlib.metadata.PackageNotFoundError:
        return "duetime"
