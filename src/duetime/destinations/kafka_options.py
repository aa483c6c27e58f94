"""Kafka options shared by the Kafka source and destination: servers, topics, security.

Checked without importing a Kafka client, so configuration is validated where none is
installed. :func:`client_config` turns the checked options into the librdkafka properties
``confluent-kafka`` takes.

Security options (all optional):

- ``security_protocol``: ``PLAINTEXT`` (default), ``SSL``, ``SASL_PLAINTEXT``, ``SASL_SSL``;
- ``sasl_mechanism``: ``PLAIN``, ``SCRAM-SHA-256``, ``SCRAM-SHA-512``, ``OAUTHBEARER``,
  ``GSSAPI``; ``sasl_username``; the password as ``sasl_password_env`` (the name of an
  environment variable holding it: keeps it out of stored config) or ``sasl_password``;
- ``ssl_ca_location``, ``ssl_certificate_location``, ``ssl_key_location`` (file paths),
  ``ssl_key_password_env``;
- ``client_config``: any other librdkafka property (``{"socket.keepalive.enable": true}``),
  except those duetime sets itself for its guarantees (offsets, idempotence, acks). Each client
  gets the properties that apply to it: a consumer-only one (``session.timeout.ms``) goes to
  the source's consumer, not to its dead-letter producer or a destination, and a producer-only
  one (``linger.ms``) the other way round, so librdkafka has nothing to warn about.
"""

from __future__ import annotations

import os
import re
import string
from collections.abc import Mapping
from typing import Any, Literal

from duetime.bus.options import Option, check_env_name
from duetime.destinations.base import Delivery, check_template
from duetime.errors import InvalidInput
from duetime.validation import check_identifier_text

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI")
MAX_TOPIC_LENGTH = 249
KEY_FIELDS = ("key", "subject", "namespace", "type", "correlation_id")

OWNED_PROPERTIES = frozenset(
    {
        "bootstrap.servers",
        "group.id",
        "enable.auto.commit",
        "enable.auto.offset.store",
        "enable.idempotence",
        "acks",
        "request.required.acks",
        "auto.offset.reset",
        "on_delivery",
        "error_cb",
    }
)
"""Properties ``client_config`` may not set: duetime's delivery guarantees rest on them."""

Role = Literal["consumer", "producer"]

CONSUMER_ONLY = frozenset(
    {
        "auto.commit.enable",
        "auto.commit.interval.ms",
        "auto.offset.reset",
        "check.crcs",
        "consume.callback.max.messages",
        "consume_cb",
        "coordinator.query.interval.ms",
        "enable.auto.commit",
        "enable.auto.offset.store",
        "enable.partition.eof",
        "fetch.error.backoff.ms",
        "fetch.max.bytes",
        "fetch.message.max.bytes",
        "fetch.min.bytes",
        "fetch.queue.backoff.ms",
        "fetch.wait.max.ms",
        "group.id",
        "group.instance.id",
        "group.protocol",
        "group.protocol.type",
        "group.remote.assignor",
        "heartbeat.interval.ms",
        "isolation.level",
        "max.partition.fetch.bytes",
        "max.poll.interval.ms",
        "max.poll.records",
        "offset.store.method",
        "offset.store.path",
        "offset.store.sync.interval.ms",
        "offset_commit_cb",
        "partition.assignment.strategy",
        "queued.max.messages.kbytes",
        "queued.min.messages",
        "rebalance_cb",
        "session.timeout.ms",
        "share.acknowledgement.mode",
    }
)
"""librdkafka's consumer-only properties (``C`` in its CONFIGURATION.md)."""

PRODUCER_ONLY = frozenset(
    {
        "acks",
        "batch.num.messages",
        "batch.size",
        "compression.codec",
        "compression.level",
        "compression.type",
        "delivery.report.only.error",
        "delivery.timeout.ms",
        "dr_cb",
        "dr_msg_cb",
        "enable.gapless.guarantee",
        "enable.idempotence",
        "linger.ms",
        "message.send.max.retries",
        "message.timeout.ms",
        "msg_order_cmp",
        "partitioner",
        "partitioner_cb",
        "produce.offset.report",
        "queue.buffering.backpressure.threshold",
        "queue.buffering.max.kbytes",
        "queue.buffering.max.messages",
        "queue.buffering.max.ms",
        "queuing.strategy",
        "request.required.acks",
        "request.timeout.ms",
        "retries",
        "sticky.partitioning.linger.ms",
        "transaction.timeout.ms",
        "transactional.id",
    }
)
"""librdkafka's producer-only properties (``P`` in its CONFIGURATION.md)."""

_NOT_FOR: Mapping[Role, frozenset[str]] = {"consumer": PRODUCER_ONLY, "producer": CONSUMER_ONLY}

_TOPIC = re.compile(r"[A-Za-z0-9._-]+")
_SERVER = re.compile(r"[A-Za-z0-9._\[\]:-]+:[0-9]{1,5}")


def check_servers(value: object, field: str = "bootstrap_servers") -> list[str]:
    """``"host:port"``, a comma-separated list of them, or a JSON list of them."""
    servers = value.split(",") if isinstance(value, str) else value
    if not isinstance(servers, list | tuple) or not servers:
        raise InvalidInput(field, "expected 'host:port' or a non-empty list of them")
    checked: list[str] = []
    for index, server in enumerate(servers):
        text = server.strip() if isinstance(server, str) else server
        if not isinstance(text, str) or not _SERVER.fullmatch(text):
            raise InvalidInput(f"{field}[{index}]", f"{server!r} is not 'host:port'")
        checked.append(text)
    return checked


def check_topic(value: object, field: str = "topic") -> str:
    """A Kafka topic name: 1-249 of ``A-Z a-z 0-9 . _ -``, not ``.`` or ``..``."""
    if (
        not isinstance(value, str)
        or not _TOPIC.fullmatch(value)
        or len(value) > MAX_TOPIC_LENGTH
        or value in (".", "..")
    ):
        raise InvalidInput(field, f"{value!r} is not a Kafka topic name (A-Z a-z 0-9 . _ -)")
    return value


def check_choice(choices: tuple[str, ...]) -> Any:
    def check(value: object, field: str) -> str:
        if value not in choices:
            raise InvalidInput(field, f"expected one of {', '.join(choices)}, got {value!r}")
        return str(value)

    return check


def check_text(value: object, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidInput(field, "expected a non-empty single-line string")
    return check_identifier_text(value, field)


def check_client_config(value: object, field: str = "client_config") -> dict[str, Any]:
    """Extra librdkafka properties: names to strings, numbers or booleans."""
    if not isinstance(value, Mapping):
        raise InvalidInput(field, "expected an object of librdkafka property → value")
    checked: dict[str, Any] = {}
    for name, item in value.items():
        if not isinstance(name, str) or not name:
            raise InvalidInput(field, f"property names are strings, not {name!r}")
        if name in OWNED_PROPERTIES:
            raise InvalidInput(f"{field}.{name}", "is set by duetime for its guarantees")
        if not isinstance(item, str | int | float | bool):
            raise InvalidInput(f"{field}.{name}", "expected a string, number or boolean")
        checked[name] = item
    return checked


def check_key_template(value: object, field: str = "key") -> str:
    """A record-key template whose placeholders are among :data:`KEY_FIELDS`."""
    if not isinstance(value, str) or not value:
        raise InvalidInput(field, "expected a non-empty key template, e.g. '{key}'")
    try:
        names = [name for _, name, _, _ in string.Formatter().parse(value) if name is not None]
    except ValueError as exc:
        raise InvalidInput(field, f"{value!r} is not a valid template: {exc}") from None
    for name in names:
        if name not in KEY_FIELDS:
            allowed = ", ".join("{" + f + "}" for f in KEY_FIELDS)
            raise InvalidInput(field, f"{value!r} uses {{{name}}}; the placeholders are {allowed}")
    return value


def check_topic_template(value: object, field: str = "topic") -> str:
    """A topic, or a template of ``{namespace}``/``{type}`` that renders to one."""
    template = check_template(value, field)
    check_topic(template.replace("{namespace}", "n").replace("{type}", "t"), field)
    return template


def record_key(template: str, delivery: Delivery) -> str:
    """The record key for ``delivery``; an absent subject or correlation id is the key."""
    event = delivery.event
    return template.format(
        key=event.key,
        subject=event.subject or event.key,
        namespace=event.namespace,
        type=event.type,
        correlation_id=event.correlation_id or event.key,
    )


SECURITY: Mapping[str, Option] = {
    "security_protocol": Option(check_choice(SECURITY_PROTOCOLS)),
    "sasl_mechanism": Option(check_choice(SASL_MECHANISMS)),
    "sasl_username": Option(check_text),
    "sasl_password": Option(check_text),
    "sasl_password_env": Option(check_env_name),
    "ssl_ca_location": Option(check_text),
    "ssl_certificate_location": Option(check_text),
    "ssl_key_location": Option(check_text),
    "ssl_key_password_env": Option(check_env_name),
    "client_config": Option(check_client_config),
}
"""The security options every Kafka source and destination takes."""

SECRET_OPTIONS = frozenset({"sasl_password"})

_PROPERTY = {
    "security_protocol": "security.protocol",
    "sasl_mechanism": "sasl.mechanism",
    "sasl_username": "sasl.username",
    "sasl_password": "sasl.password",
    "ssl_ca_location": "ssl.ca.location",
    "ssl_certificate_location": "ssl.certificate.location",
    "ssl_key_location": "ssl.key.location",
}


def client_config(
    servers: list[str],
    security: Mapping[str, Any],
    env: Mapping[str, str] | None = None,
    *,
    role: Role,
) -> dict[str, Any]:
    """librdkafka properties for a ``role`` client of ``servers`` with the security options.

    Passwords named by ``*_env`` are read from ``env`` (the process's environment) here, so
    a missing variable fails at start-up, naming it. Of ``client_config``, only the properties
    that apply to ``role`` are kept.
    """
    environ = os.environ if env is None else env
    config: dict[str, Any] = {"bootstrap.servers": ",".join(servers)}
    if "sasl_password" in security and "sasl_password_env" in security:
        raise InvalidInput("sasl_password", "give either sasl_password or sasl_password_env")
    for option, value in security.items():
        if option in _PROPERTY:
            config[_PROPERTY[option]] = value
        elif option in ("sasl_password_env", "ssl_key_password_env"):
            secret = environ.get(value)
            if not secret:
                raise InvalidInput(option, f"environment variable {value} is not set")
            name = "sasl.password" if option == "sasl_password_env" else "ssl.key.password"
            config[name] = secret
        elif option == "client_config":
            config.update((k, v) for k, v in value.items() if k not in _NOT_FOR[role])
        elif option not in SECURITY:
            raise InvalidInput(option, "is not a Kafka security option")
    return config
