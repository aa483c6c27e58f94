"""Message formats: what a destination's body and headers look like to the receiver.

Every broker and webhook destination takes ``format``:

- ``"duetime"`` (default): duetime's versioned envelope (:func:`~.base.envelope_json`).
- ``"cloudevents"``: a CloudEvents 1.0 event in *structured* mode — the whole event as
  ``application/cloudevents+json`` in the body.
- ``"cloudevents-binary"``: CloudEvents 1.0 in *binary* mode — the payload alone as the body
  (``application/json``), the context attributes as headers, named as each protocol binding
  says: HTTP and NATS ``ce-<attr>``, Kafka ``ce_<attr>``, AMQP ``cloudEvents_<attr>``.
- ``"payload"``: the payload alone as the body; duetime's fields travel as headers
  (``Duetime-Id``, ``Duetime-Key``, ``Duetime-Namespace``, ``Duetime-Type``, ``Duetime-Due-At``,
  ``Duetime-Attempt``, ``Duetime-Delivery-Id``, and ``Duetime-Subject`` /
  ``Duetime-Correlation-Id`` when set).
- ``{"template": {...}}``: a custom JSON envelope. Every string of the template that is exactly
  ``"{field}"`` becomes that field's value, typed (a number stays a number, the payload an
  object); a string with placeholders among other text becomes text, where an absent value
  (no ``subject``, a null payload field) is empty. Fields: ``id``, ``key``,
  ``namespace``, ``type``, ``payload``, ``payload.<name>[.<name>…]``, ``subject``,
  ``correlation_id``, ``attempt``, ``max_attempts``, ``delivery_id``, ``destination``,
  ``producer``, ``due_at``, ``fired_at``, ``emitted_at`` (ISO 8601) and ``due_at_ms``,
  ``sent_at_ms`` (epoch milliseconds). ``{{`` and ``}}`` are literal braces. A
  ``payload.<name>`` the event lacks fails the delivery for good (it goes to the dead-letter
  queue naming the field), never sends a half-filled envelope.

CloudEvents attributes: ``id`` = the delivery id (stable across attempts: the receiver's
deduplication id), ``source`` = ``duetime:<namespace>`` (overridable with ``ce_source``),
``type``, ``subject`` (when set), ``time`` = when it was due, ``datacontenttype`` =
``application/json``, ``data`` = the payload, and the extensions ``duetimekey``,
``duetimeattempt``, ``correlationid`` (when set). The SDK (``cloudevents``) is not used: the
JSON format and the header names are a dozen lines here, while the SDK brings its own HTTP
conversion layer and has no Kafka, NATS or AMQP binding for these clients.

A ``DueTimeReached`` envelope of a service-call system's own, with no handler code::

    "format": {"template": {"id": "{delivery_id}", "type": "{type}",
                            "tenantId": "{payload.tenantId}", "correlationId": "{correlation_id}",
                            "timestampMs": "{sent_at_ms}", "payload": "{payload}"}}
"""

from __future__ import annotations

import json
import string
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from duetime.destinations.base import Delivery, DeliveryFailed, envelope
from duetime.errors import InvalidInput
from duetime.model import JSON, iso

Wire = Literal["http", "nats", "kafka", "amqp", "redis"]
NAMES = ("duetime", "cloudevents", "cloudevents-binary", "payload")
CE_PREFIX: Mapping[str, str] = {
    "http": "ce-",
    "nats": "ce-",
    "kafka": "ce_",
    "amqp": "cloudEvents_",
}
"""Binary-mode header prefixes, as the CloudEvents protocol bindings define them."""

JSON_TYPE = "application/json"
CLOUDEVENTS_JSON_TYPE = "application/cloudevents+json"

_SCALARS = (
    "id",
    "key",
    "namespace",
    "type",
    "subject",
    "correlation_id",
    "attempt",
    "max_attempts",
    "delivery_id",
    "destination",
    "producer",
    "due_at",
    "fired_at",
    "emitted_at",
    "due_at_ms",
    "sent_at_ms",
)
TEMPLATE_FIELDS = (*_SCALARS, "payload")


@dataclass(frozen=True, slots=True)
class Rendered:
    """One message ready to send: its body, content type, and the headers the format adds."""

    body: bytes
    content_type: str
    headers: dict[str, str] = field(default_factory=dict)


class Format(Protocol):
    """Turns a delivery into a message for one protocol."""

    @property
    def name(self) -> str: ...

    def render(self, delivery: Delivery, protocol: Wire) -> Rendered: ...


def dumps(value: object) -> bytes:
    """Compact UTF-8 JSON; a value JSON cannot carry fails the delivery for good."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise DeliveryFailed(f"the event cannot be encoded as JSON: {exc}", False) from exc
    return text.encode("utf-8")


@dataclass(frozen=True, slots=True)
class DuetimeFormat:
    """duetime's own envelope."""

    @property
    def name(self) -> str:
        return "duetime"

    def render(self, delivery: Delivery, protocol: Wire) -> Rendered:
        return Rendered(dumps(envelope(delivery)), JSON_TYPE)


@dataclass(frozen=True, slots=True)
class PayloadFormat:
    """The payload alone; duetime's fields as headers."""

    @property
    def name(self) -> str:
        return "payload"

    def render(self, delivery: Delivery, protocol: Wire) -> Rendered:
        event = delivery.event
        headers = {
            "Duetime-Id": str(event.id),
            "Duetime-Key": event.key,
            "Duetime-Namespace": event.namespace,
            "Duetime-Type": event.type,
            "Duetime-Due-At": iso(event.due_at) or "",
            "Duetime-Attempt": str(event.attempt),
            "Duetime-Delivery-Id": delivery.delivery_id,
        }
        if event.subject is not None:
            headers["Duetime-Subject"] = event.subject
        if event.correlation_id is not None:
            headers["Duetime-Correlation-Id"] = event.correlation_id
        return Rendered(dumps(event.payload), JSON_TYPE, headers)


@dataclass(frozen=True, slots=True)
class CloudEventsFormat:
    """CloudEvents 1.0, structured (the event as JSON) or binary (attributes as headers)."""

    binary: bool = False
    source: str | None = None

    @property
    def name(self) -> str:
        return "cloudevents-binary" if self.binary else "cloudevents"

    def attributes(self, delivery: Delivery) -> dict[str, str]:
        """The context attributes (every one a string, as binary mode carries them)."""
        event = delivery.event
        attributes = {
            "specversion": "1.0",
            "id": delivery.delivery_id,
            "source": self.source or f"duetime:{event.namespace}",
            "type": event.type,
            "time": iso(event.due_at) or "",
            "datacontenttype": JSON_TYPE,
            "duetimekey": event.key,
            "duetimeattempt": str(event.attempt),
        }
        if event.subject is not None:
            attributes["subject"] = event.subject
        if event.correlation_id is not None:
            attributes["correlationid"] = event.correlation_id
        return attributes

    def render(self, delivery: Delivery, protocol: Wire) -> Rendered:
        attributes = self.attributes(delivery)
        payload = delivery.event.payload
        if not self.binary:
            structured: dict[str, Any] = dict(attributes)
            structured["duetimeattempt"] = delivery.event.attempt  # an Integer attribute
            structured["data"] = payload
            return Rendered(dumps(structured), CLOUDEVENTS_JSON_TYPE)
        prefix = CE_PREFIX.get(protocol)
        if prefix is None:
            raise DeliveryFailed(f"CloudEvents has no binary mode for {protocol}", False)
        del attributes["datacontenttype"]  # the protocol's own content type carries it
        headers = {prefix + name: value for name, value in attributes.items()}
        return Rendered(dumps(payload), JSON_TYPE, headers)


# -- templates --------------------------------------------------------------------------------
Getter = Callable[[Delivery, int], JSON]


def _scalar(name: str) -> Getter:
    def get(delivery: Delivery, now_ms: int) -> JSON:
        event = delivery.event
        if name == "delivery_id":
            return delivery.delivery_id
        if name == "destination":
            return delivery.destination
        if name == "sent_at_ms":
            return now_ms
        if name == "due_at_ms":
            return int(event.due_at.timestamp() * 1000)
        if name in ("due_at", "fired_at", "emitted_at"):
            return iso(getattr(event, name))
        value: JSON = getattr(event, name)
        return value

    return get


def _payload_path(path: tuple[str, ...]) -> Getter:
    def get(delivery: Delivery, now_ms: int) -> JSON:
        value: JSON = delivery.event.payload
        for depth, part in enumerate(path):
            if not isinstance(value, dict) or part not in value:
                where = ".".join(("payload", *path[: depth + 1]))
                raise DeliveryFailed(f"the template needs {where}, which the event lacks", False)
            value = value[part]
        return value

    return get


def _getter(name: str, field_path: str) -> Getter:
    if name in _SCALARS:
        return _scalar(name)
    if name == "payload":
        return _payload_path(())
    head, _, rest = name.partition(".")
    if head == "payload" and rest and all(rest.split(".")):
        return _payload_path(tuple(rest.split(".")))
    allowed = ", ".join("{" + f + "}" for f in TEMPLATE_FIELDS)
    raise InvalidInput(field_path, f"unknown placeholder {{{name}}}; expected one of {allowed}")


Node = Callable[[Delivery, int], JSON]


def _compile(value: object, field_path: str) -> Node:
    if isinstance(value, dict):
        parts: list[tuple[str, Node]] = []
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidInput(field_path, f"object keys are strings, not {key!r}")
            parts.append((key, _compile(item, f"{field_path}.{key}")))
        return lambda d, now: {key: node(d, now) for key, node in parts}
    if isinstance(value, list):
        items = [_compile(item, f"{field_path}[{i}]") for i, item in enumerate(value)]
        return lambda d, now: [node(d, now) for node in items]
    if isinstance(value, str):
        return _compile_text(value, field_path)
    if value is None or isinstance(value, bool | int | float):
        constant: JSON = value
        return lambda d, now: constant
    raise InvalidInput(field_path, f"expected JSON, got {type(value).__name__}")


def _compile_text(text: str, field_path: str) -> Node:
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError as exc:
        raise InvalidInput(field_path, f"{text!r} is not a valid template: {exc}") from None
    pieces: list[str | Getter] = []
    for literal, name, spec, conversion in parsed:
        if literal:
            pieces.append(literal)
        if name is None:
            continue
        if spec or conversion:
            raise InvalidInput(field_path, f"{{{name}}}: no format specs or conversions")
        pieces.append(_getter(name, field_path))
    if len(pieces) == 1 and not isinstance(pieces[0], str):
        whole = pieces[0]
        return whole  # exactly "{field}": the value keeps its JSON type
    if all(isinstance(piece, str) for piece in pieces):
        constant = "".join(p for p in pieces if isinstance(p, str))
        return lambda d, now: constant

    def render(d: Delivery, now: int) -> JSON:
        out: list[str] = []
        for piece in pieces:
            if isinstance(piece, str):
                out.append(piece)
            else:
                value = piece(d, now)
                out.append(_as_text(value))
        return "".join(out)

    return render


def _as_text(value: JSON) -> str:
    """A value inside text: a string as it is, nothing (a missing subject, an event not yet
    fired) as empty text — never the word ``null`` — and anything else as its JSON."""
    if isinstance(value, str):
        return value
    return "" if value is None else json.dumps(value, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class TemplateFormat:
    """A custom JSON envelope filled from the delivery (see the module docstring)."""

    template: JSON
    clock: Callable[[], float] = time.time
    _node: Node = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_node", _compile(self.template, "format.template"))

    @property
    def name(self) -> str:
        return "template"

    def render(self, delivery: Delivery, protocol: Wire) -> Rendered:
        now_ms = int(self.clock() * 1000)
        return Rendered(dumps(self._node(delivery, now_ms)), JSON_TYPE)


# -- configuration ----------------------------------------------------------------------------
def check_format(value: object, field: str = "format") -> object:
    """A format name or ``{"template": {...}}``, checked (placeholders included) as given."""
    make_format(value, field)
    return value


def make_format(value: object, field: str = "format", *, ce_source: str | None = None) -> Format:
    """The format ``value`` names: see the module docstring."""
    if value is None or value == "duetime":
        return DuetimeFormat()
    if value == "cloudevents":
        return CloudEventsFormat(False, ce_source)
    if value == "cloudevents-binary":
        return CloudEventsFormat(True, ce_source)
    if value == "payload":
        return PayloadFormat()
    if isinstance(value, Mapping):
        if set(value) != {"template"}:
            raise InvalidInput(field, "a custom format is an object with one key, 'template'")
        return TemplateFormat(_template_copy(value["template"], f"{field}.template"))
    raise InvalidInput(
        field, f"unknown format {value!r}; expected one of {NAMES} or {{'template': {{...}}}}"
    )


def _template_copy(value: object, field: str) -> JSON:
    if not isinstance(value, dict | list | str):
        raise InvalidInput(field, "expected a JSON object, array or string")
    _compile(value, field)
    return value


def check_ce_source(value: object, field: str = "ce_source") -> str:
    """The CloudEvents ``source`` attribute: a non-empty URI-reference."""
    if not isinstance(value, str) or not value or any(c.isspace() for c in value):
        raise InvalidInput(field, "expected a URI-reference without spaces")
    return value
