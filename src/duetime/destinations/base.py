"""The one contract every destination keeps: a Delivery in, delivered or a DeliveryFailed out.

A destination (webhook, NATS JetStream, Redis stream, RabbitMQ exchange) receives a
:class:`Delivery` — the event plus which destination it is for and a stable ``delivery_id`` — and
either returns (the receiver has it durably) or raises :class:`DeliveryFailed`, which says whether
trying again can help. Retries, backoff and dead-lettering belong to the worker, not here.

The envelope
------------
Every destination sends the same JSON body, :func:`envelope_json` (UTF-8, compact, keys in this
order). It is versioned by ``"version"``; fields are only ever added, never renamed or removed::

    {
      "version": 1,
      "id": 42,                         # the timer's id: stable across attempts
      "key": "order-7:reminder",        # the caller's idempotency key: stable across attempts
      "namespace": "shop",
      "type": "order.paid",
      "payload": {...},                 # the JSON the caller scheduled
      "subject": "user-9",              # or null
      "due_at": "2025-03-15T13:00:00Z", # when it was due (UTC, ISO 8601 with "Z")
      "fired_at": "2025-03-15T13:00:00.012Z",  # when it first fired, or null
      "attempt": 1,                     # 1 on the first try, 2 on the first retry...
      "max_attempts": 20,
      "correlation_id": "req-123",      # or null
      "destination": "billing-hook",
      "delivery_id": "shop:order-7-paid:billing-hook",  # "<namespace>:<key>:<destination>"
      "emitted_at": "2025-03-15T12:58:00Z",  # when the event was stored
      "producer": "api",                # who stored it: a node id, "api", "cli"; or null
      "redelivery": 0,                  # attempts before this one (attempt - 1)
      "message_id": "shop:order-7-paid:billing-hook"  # the same as delivery_id
    }

``delivery_id`` is the deduplication id: it is the same on every attempt of one event to one
destination, so receivers drop redeliveries by it (HTTP ``Idempotency-Key``, NATS
``Nats-Msg-Id``, AMQP ``message_id``, the Redis entry's ``delivery_id`` field). ``message_id``
repeats it under the name an event bus's consumers know it by.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import string
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable
from urllib.parse import urlsplit

from duetime.errors import DuetimeError, InvalidInput
from duetime.handlers import Event
from duetime.model import JSON, iso
from duetime.support.redaction import redact_url
from duetime.timemath.ratelimit import Rate, check_burst, parse_rate
from duetime.validation import check_identifier_text

ENVELOPE_VERSION = 1
RESPONSE_LIMIT = 500
"""How many bytes of a receiver's response a failure records."""

TEMPLATE_FIELDS = ("namespace", "type")
"""Placeholders a subject, stream or routing-key template may use, e.g. ``"events.{type}"``."""

T = TypeVar("T")

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}")


@dataclass(frozen=True, slots=True)
class Delivery:
    """One event on its way to one destination; ``delivery_id`` is what receivers dedupe on."""

    event: Event
    destination: str
    delivery_id: str
    trace_headers: Mapping[str, str] = field(default_factory=dict)
    """W3C ``traceparent`` (and ``tracestate``) to send with the message when tracing is on:
    every destination sends them (HTTP, NATS, AMQP and Kafka headers, Redis entry fields)."""

    @classmethod
    def from_event(cls, event: Event, destination: str) -> Delivery:
        """The delivery of ``event`` to ``destination``, with its stable id."""
        return cls(event, destination, delivery_id(event, destination))


def delivery_id(event: Event, destination: str) -> str:
    """``<namespace>:<key>:<destination>`` — the same on every attempt, unique per target.

    Built from the caller's idempotency key, not the row id: row ids start again at 1 in a fresh
    database, and a broker's duplicate window would then drop new events as old ones.
    """
    return f"{event.namespace}:{event.key}:{destination}"


class DeliveryFailed(DuetimeError):
    """The destination did not take the delivery; ``retryable`` says whether trying again can help.

    Retryable failures (the receiver is down, slow, overloaded or asked us to come back) are
    retried with backoff; ``retry_after`` is the receiver's own hint in seconds, when it gave
    one. A failure that is not retryable (the receiver refused the request itself) goes to the
    dead-letter queue at once with ``response`` — what the receiver said — recorded.
    """

    code = "delivery_failed"

    def __init__(
        self,
        message: str,
        retryable: bool,
        response: str | None = None,
        *,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.response = response
        self.retry_after = retry_after

    def describe(self) -> str:
        """The message with the receiver's response, as recorded in the attempt's error."""
        if self.response:
            return f"{self.message}; response: {self.response}"
        return self.message


@runtime_checkable
class Destination(Protocol):
    """Where due events go. ``deliver`` returns once the receiver holds the delivery durably."""

    name: str

    async def deliver(self, delivery: Delivery) -> None:
        """Hand over one delivery, or raise :class:`DeliveryFailed`."""
        ...

    async def close(self) -> None:
        """Release connections; the destination may be used again afterwards (it reconnects)."""
        ...


def envelope(delivery: Delivery) -> dict[str, JSON]:
    """The envelope as a dict; see the module docstring for the fields."""
    event = delivery.event
    return {
        "version": ENVELOPE_VERSION,
        "id": event.id,
        "key": event.key,
        "namespace": event.namespace,
        "type": event.type,
        "payload": event.payload,
        "subject": event.subject,
        "due_at": iso(event.due_at),
        "fired_at": iso(event.fired_at),
        "attempt": event.attempt,
        "max_attempts": event.max_attempts,
        "correlation_id": event.correlation_id,
        "destination": delivery.destination,
        "delivery_id": delivery.delivery_id,
        "emitted_at": iso(event.emitted_at),
        "producer": event.producer,
        "redelivery": event.redelivery,
        "message_id": delivery.delivery_id,
    }


def envelope_json(delivery: Delivery) -> bytes:
    """The envelope as compact UTF-8 JSON: the body every destination sends."""
    try:
        text = json.dumps(
            envelope(delivery), ensure_ascii=False, allow_nan=False, separators=(",", ":")
        )
    except (TypeError, ValueError) as exc:
        # Payloads are validated when scheduled, so this is a stored value JSON cannot carry:
        # no retry can fix it.
        raise DeliveryFailed(f"the event cannot be encoded as JSON: {exc}", False) from exc
    return text.encode("utf-8")


def check_name(value: object, field: str = "name") -> str:
    """A destination name: it appears in ``delivery_id`` and in error fields, so keep it plain."""
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise InvalidInput(
            field,
            f"{value!r} is not a destination name: 1-63 characters of A-Z, a-z, 0-9, '_', '.',"
            " '-', starting with a letter, digit or '_'",
        )
    return value


def check_rate_text(value: object, field: str = "rate") -> str:
    """A rate as the configuration file gives it (``"100/s"``), checked, kept as text."""
    if not isinstance(value, str):
        raise InvalidInput(field, f"expected a rate such as '100/s', got {value!r}")
    parse_rate(value, field)
    return value


def check_rate_limit(rate: object, burst: object) -> tuple[Rate | None, int | None]:
    """A destination's own rate limit (``rate="100/s"``, ``burst``): at most that many sends a
    second to it, whatever routes reach it (:func:`duetime.model.flow_rules.destination_rule`)."""
    parsed = rate if isinstance(rate, Rate) or rate is None else parse_rate(check_rate_text(rate))
    if burst is None:
        return parsed, None
    checked = check_burst(burst)
    if parsed is None:
        raise InvalidInput("burst", "a burst only applies to a rate: give a rate too")
    return parsed, checked


def own_rate(destination: Destination) -> tuple[Rate, int | None] | None:
    """A destination's own rate limit and burst (None: it has none; a destination of one's own
    may have ``rate`` and ``burst`` attributes as the built-in ones do)."""
    rate = getattr(destination, "rate", None)
    burst = getattr(destination, "burst", None)
    if not isinstance(rate, Rate):
        return None
    return rate, burst if isinstance(burst, int) and not isinstance(burst, bool) else None


def check_template(value: object, field: str) -> str:
    """A subject/stream/routing-key template whose only placeholders are ``TEMPLATE_FIELDS``."""
    if not isinstance(value, str):
        raise InvalidInput(field, f"expected a string, got {type(value).__name__}")
    check_identifier_text(value, field)
    try:
        parts = list(string.Formatter().parse(value))
    except ValueError as exc:
        raise InvalidInput(field, f"{value!r} is not a valid template: {exc}") from None
    for _, name, spec, conversion in parts:
        if name is None:
            continue
        if name not in TEMPLATE_FIELDS or spec or conversion:
            allowed = ", ".join("{" + f + "}" for f in TEMPLATE_FIELDS)
            raise InvalidInput(
                field, f"{value!r} uses {{{name}}}; the only placeholders are {allowed}"
            )
    return value


def render_template(template: str, delivery: Delivery) -> str:
    """Fill a template checked by :func:`check_template` with the delivery's namespace and type."""
    return template.format(namespace=delivery.event.namespace, type=delivery.event.type)


def check_timeout(value: object, field: str = "timeout", *, maximum: float = 300.0) -> float:
    """A timeout in seconds: positive and bounded, so a stuck receiver cannot hold a worker."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput(field, f"expected a number of seconds, got {value!r}")
    seconds = float(value)
    if not 0 < seconds <= maximum:
        raise InvalidInput(field, f"must be more than 0 and at most {maximum:g} seconds")
    return seconds


def check_url(value: object, field: str, schemes: tuple[str, ...]) -> str:
    """A URL with one of ``schemes`` and a host, so a typo fails at configuration, not at 3 a.m."""
    if not isinstance(value, str) or not value:
        raise InvalidInput(field, f"expected a URL, got {value!r}")
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - parsing the port validates it
    except ValueError as exc:
        raise InvalidInput(field, f"{value!r} is not a valid URL: {exc}") from None
    if parts.scheme not in schemes:
        raise InvalidInput(
            field, f"{redact_url(value)!r} must start with one of: {', '.join(schemes)}://"
        )
    if not parts.hostname and parts.scheme != "unix":
        raise InvalidInput(field, f"{redact_url(value)!r} has no host")
    return value


def url_origin(url: str) -> str:
    """``scheme://host:port`` plus ``/…`` if there is more: webhook paths often hold tokens."""
    try:
        parts = urlsplit(url)
        host = parts.netloc.rpartition("@")[2]
    except ValueError:
        return "(invalid URL)"
    rest = "/…" if parts.path.strip("/") or parts.query else ""
    return f"{parts.scheme}://{host}{rest}"


class SingleFlight(Generic[T]):
    """One connection attempt at a time, shared by every delivery waiting for it.

    Without it, a hundred concurrent deliveries to a broker that is down would each wait out a
    connect timeout in turn; with it they share one attempt and fail together, at once.
    """

    def __init__(self) -> None:
        self._task: asyncio.Task[T] | None = None

    async def run(self, connect: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Join the attempt in progress, or start ``connect()`` if there is none."""
        task = self._task
        if task is None or task.done():
            task = asyncio.create_task(connect())
            task.add_done_callback(_retrieve)
            self._task = task
        # A waiter that is cancelled leaves the attempt running for the others.
        return await asyncio.shield(task)

    async def cancel(self) -> None:
        """Abandon the attempt in progress, if any (on close)."""
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


def _retrieve(task: asyncio.Task[Any]) -> None:
    """Mark a failed attempt's exception as seen: all its waiters may have been cancelled."""
    if not task.cancelled():
        task.exception()


def describe_error(exc: BaseException) -> str:
    """``"ErrorType: message"`` — exception messages alone are often empty or vague."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
