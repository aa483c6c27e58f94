"""Destination configuration as data: a typed spec per destination, checked field by field.

Destinations are described in JSON (a config file, an environment variable, later the REST API),
keyed by name; each names its ``kind`` and that kind's options, flat::

    {
      "billing-hook": {"kind": "webhook", "url": "https://billing.example/hooks",
                       "secret_env": "BILLING_HOOK_SECRET", "timeout": 5},
      "bus":    {"kind": "nats", "url": "nats://nats:4222", "subject": "events.{type}"},
      "audit":  {"kind": "redis", "url": "redis://redis:6379/0", "stream": "audit",
                 "maxlen": 1000000},
      "orders": {"kind": "rabbitmq", "url": "amqp://guest:guest@rabbit:5672/",
                 "exchange": "orders", "routing_key": "{type}"}
    }

Options per kind (``*`` = required):

- ``webhook``: ``url``\\*, ``secret`` or ``secret_env`` (the name of an environment variable that
  holds it; keeps secrets out of stored config), ``timeout`` (s, default 10), ``headers``.
- ``nats``: ``url``\\* (one URL or a list), ``subject``\\*, ``timeout`` (default 5),
  ``credentials`` (a ``.creds`` file path).
- ``redis``: ``url``\\*, ``stream``\\*, ``maxlen``, ``timeout`` (default 5).
- ``rabbitmq``: ``url``\\*, ``exchange``\\*, ``routing_key`` (default ``"{type}"``),
  ``timeout`` (default 10).

Every kind also takes ``format`` and ``ce_source`` (the message format), and ``rate`` (``"100/s"``)
with optionally ``burst``: the destination's own rate limit, a rule on its deliveries
(:func:`duetime.model.flow_rules.destination_rule`).

Another package adds a kind through an entry point (:mod:`duetime.destinations.plugins`); a
``kind`` neither built in nor installed is refused, naming ``destinations.<name>.kind``.

Subjects, streams and routing keys may use the placeholders ``{namespace}`` and ``{type}``.
Every mistake is an :class:`~duetime.errors.InvalidInput` whose ``field`` is the path to fix,
e.g. ``destinations.billing-hook.url``; unknown options are refused (a typo is not ignored).
This module imports no broker library, so configuration is checked where none is installed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeGuard, get_args

from duetime.bus.options import (
    Option,
    at,
    check_against,
    check_env_name,
    parse_named,
    redacted,
    split_spec,
)
from duetime.destinations.base import (
    check_name,
    check_rate_text,
    check_template,
    check_timeout,
    check_url,
    url_origin,
)
from duetime.destinations.formats import check_ce_source, check_format
from duetime.destinations.kafka_options import (
    SECURITY,
    check_key_template,
    check_servers,
    check_topic_template,
)
from duetime.destinations.plugins import DestinationPlugin, load_plugin, plugin_entry_points
from duetime.errors import InvalidInput
from duetime.model import JSON
from duetime.timemath.ratelimit import check_burst
from duetime.validation import check_identifier_text

Kind = Literal["webhook", "nats", "redis", "rabbitmq", "kafka"]
"""The built-in kinds; others come from plugins (:mod:`duetime.destinations.plugins`)."""
KINDS: tuple[Kind, ...] = get_args(Kind)

WEBHOOK_SCHEMES = ("http", "https")
NATS_SCHEMES = ("nats", "tls", "ws", "wss")
REDIS_SCHEMES = ("redis", "rediss", "unix")
RABBITMQ_SCHEMES = ("amqp", "amqps")
MAX_SHORTSTR = 255
"""AMQP short strings (exchange names, routing keys, message ids) hold at most 255 bytes."""
MIN_SECRET_LENGTH = 16

RESERVED_HEADERS = frozenset(
    {
        "content-type",
        "content-length",
        "host",
        "idempotency-key",
        "duetime-event-type",
        "duetime-attempt",
        "duetime-signature",
    }
)
"""Headers a webhook sets itself; configured ``headers`` may not replace them."""

_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_SECRET_KEYS = frozenset({"secret", "sasl_password"})


# -- option checks, shared by the parser and the destinations' constructors -------------------
def check_webhook_url(value: object, field: str = "url") -> str:
    return check_url(value, field, WEBHOOK_SCHEMES)


def check_nats_urls(value: object, field: str = "url") -> list[str]:
    """One server URL or a list of them (the seeds nats-py tries in turn)."""
    urls = [value] if isinstance(value, str) else value
    if not isinstance(urls, list | tuple) or not urls:
        raise InvalidInput(field, "expected a server URL or a non-empty list of them")
    return [check_url(url, f"{field}[{i}]", NATS_SCHEMES) for i, url in enumerate(urls)]


def check_redis_url(value: object, field: str = "url") -> str:
    return check_url(value, field, REDIS_SCHEMES)


def check_rabbitmq_url(value: object, field: str = "url") -> str:
    return check_url(value, field, RABBITMQ_SCHEMES)


def check_subject(value: object, field: str = "subject") -> str:
    """A NATS subject template: no spaces, no empty tokens, no wildcards (we publish to it)."""
    subject = check_template(value, field)
    tokens = subject.split(".")
    if not subject or any(c.isspace() for c in subject) or "" in tokens:
        raise InvalidInput(field, f"{subject!r} is not a NATS subject")
    if "*" in tokens or ">" in tokens:
        raise InvalidInput(field, f"{subject!r} has a wildcard; publish to a concrete subject")
    return subject


def check_stream(value: object, field: str = "stream") -> str:
    stream = check_template(value, field)
    if not stream:
        raise InvalidInput(field, "must not be empty")
    return stream


def check_routing_key(value: object, field: str = "routing_key") -> str:
    key = check_template(value, field)
    if len(key.encode("utf-8")) > MAX_SHORTSTR:
        raise InvalidInput(field, f"must be at most {MAX_SHORTSTR} bytes")
    return key


def check_exchange(value: object, field: str = "exchange") -> str:
    """An exchange name; ``""`` is the default exchange, which routes by queue name."""
    if not isinstance(value, str) or len(value.encode("utf-8")) > MAX_SHORTSTR:
        raise InvalidInput(field, f"expected an exchange name of at most {MAX_SHORTSTR} bytes")
    return check_identifier_text(value, field)


def check_maxlen(value: object, field: str = "maxlen") -> int | None:
    """The approximate length a stream is trimmed to, or None to keep everything."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInput(field, f"expected a positive whole number of entries, got {value!r}")
    return value


def check_secret(value: object, field: str = "secret") -> str | None:
    """A webhook signing secret; absent means requests go unsigned."""
    if value is None:
        return None
    if not isinstance(value, str) or len(value) < MIN_SECRET_LENGTH:
        raise InvalidInput(field, f"expected a string of at least {MIN_SECRET_LENGTH} characters")
    return value


def check_headers(value: object, field: str = "headers") -> dict[str, str]:
    """Extra webhook request headers (e.g. ``Authorization``); they may not replace duetime's."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInput(field, "expected an object of header name → value")
    headers: dict[str, str] = {}
    for name, text in value.items():
        if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
            raise InvalidInput(field, f"{name!r} is not a valid header name")
        if name.lower() in RESERVED_HEADERS:
            raise InvalidInput(f"{field}.{name}", "is set by duetime and cannot be overridden")
        if not isinstance(text, str) or any(c in text for c in "\r\n\0"):
            raise InvalidInput(f"{field}.{name}", "expected a single-line string")
        headers[name] = text
    return headers


def check_path(value: object, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidInput(field, "expected a file path")
    return value


# -- the schema -------------------------------------------------------------------------------
_COMMON: Mapping[str, Option] = {
    "format": Option(check_format),
    "ce_source": Option(check_ce_source),
    # The destination's own rate limit: see duetime.model.flow_rules.destination_rule.
    "rate": Option(check_rate_text),
    "burst": Option(check_burst),
}

SCHEMAS: Mapping[Kind, Mapping[str, Option]] = {
    "webhook": {
        "url": Option(check_webhook_url, required=True),
        "secret": Option(check_secret),
        "secret_env": Option(check_env_name),
        "timeout": Option(check_timeout),
        "headers": Option(check_headers),
        **_COMMON,
    },
    "nats": {
        "url": Option(check_nats_urls, required=True),
        "subject": Option(check_subject, required=True),
        "timeout": Option(check_timeout),
        "credentials": Option(check_path),
        **_COMMON,
    },
    "redis": {
        "url": Option(check_redis_url, required=True),
        "stream": Option(check_stream, required=True),
        "maxlen": Option(check_maxlen),
        "timeout": Option(check_timeout),
        **_COMMON,
    },
    "rabbitmq": {
        "url": Option(check_rabbitmq_url, required=True),
        "exchange": Option(check_exchange, required=True),
        "routing_key": Option(check_routing_key),
        "timeout": Option(check_timeout),
        **_COMMON,
    },
    "kafka": {
        "bootstrap_servers": Option(check_servers, required=True),
        "topic": Option(check_topic_template, required=True),
        "key": Option(check_key_template),
        "headers": Option(check_headers),
        "timeout": Option(check_timeout),
        **_COMMON,
        **SECURITY,
    },
}


def is_builtin(kind: str) -> TypeGuard[Kind]:
    return kind in KINDS


def known_kinds() -> tuple[str, ...]:
    """The built-in kinds, then those of the installed plugins."""
    return KINDS + tuple(sorted(plugin_entry_points(KINDS)))


def resolve_kind(kind: str, field: str) -> Kind | DestinationPlugin:
    """A built-in kind, or the plugin of another; an unknown kind is an error naming ``field``."""
    if is_builtin(kind):
        return kind
    plugins = plugin_entry_points(KINDS)
    point = plugins.get(kind)
    if point is None:
        known = ", ".join(KINDS + tuple(sorted(plugins)))
        raise InvalidInput(field, f"unknown destination kind {kind!r}; expected one of: {known}")
    return load_plugin(point, field)


def check_options(kind: str, options: Mapping[str, object], path: str = "") -> dict[str, Any]:
    """Check every option of ``kind``: unknown ones are refused, required ones must be there."""
    return check_kind_options(resolve_kind(kind, at(path, "kind")), kind, options, path)


def check_kind_options(
    resolved: Kind | DestinationPlugin, kind: str, options: Mapping[str, object], path: str
) -> dict[str, Any]:
    """:func:`check_options` for a kind already resolved (built-in, or a plugin's schema)."""
    schema = SCHEMAS[resolved] if isinstance(resolved, str) else {**resolved.options, **_COMMON}
    checked = check_against(schema, options, path, kind, "destination")
    for secret in ("secret", "sasl_password"):
        if secret in checked and f"{secret}_env" in checked:
            raise InvalidInput(at(path, secret), f"give either {secret} or {secret}_env, not both")
    if "burst" in checked and "rate" not in checked:
        raise InvalidInput(at(path, "burst"), "a burst only applies to a rate: give a rate too")
    return checked


@dataclass(frozen=True, slots=True)
class DestinationSpec:
    """A named destination of one kind with its checked options: what to build, as data."""

    kind: str
    """A built-in :data:`Kind` or the name of a plugin's kind."""
    name: str
    options: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, raw: object, *, name: str | None = None, path: str = "") -> DestinationSpec:
        """Parse ``{"kind": ..., <options>}`` (with ``"name"`` unless ``name`` is given).

        ``path`` prefixes every error field, e.g. ``"destinations.hook1"``.
        """
        kinds = known_kinds()
        kind, checked_name, options = split_spec(raw, name, path, kinds, "destination", check_name)
        return cls(kind, checked_name, check_options(kind, options, path))

    def to_dict(self, *, redact: bool = True) -> dict[str, JSON]:
        """The spec as JSON, the shape :meth:`from_dict` reads; secrets hidden unless asked."""
        options = dict(self.options)
        if redact:
            options = redacted(options, _SECRET_KEYS)
            url = self.options.get("url")
            if isinstance(url, str) and self.kind == "webhook":
                options["url"] = url_origin(url)  # webhook paths and queries often hold tokens
        return {"name": self.name, "kind": self.kind, **options}

    def __repr__(self) -> str:
        return f"DestinationSpec({self.to_dict()!r})"


def parse_destinations(raw: object, path: str = "destinations") -> dict[str, DestinationSpec]:
    """Parse ``{name: {"kind": ..., <options>}, ...}``; errors name ``<path>.<name>.<option>``."""

    def parse(item: object, name: str, field_path: str) -> DestinationSpec:
        return DestinationSpec.from_dict(item, name=name, path=field_path)

    return parse_named(raw, path, "destination", parse, check_name)
