"""Source configuration as data: a typed spec per source, checked field by field.

Sources are described in JSON (a config file, ``DUETIME_SOURCES``), keyed by name, each with its
``kind``, the broker options, and how messages map to timers::

    {
      "service-calls": {"kind": "nats", "url": "nats://nats:4222",
                        "subject": "service-calls.schedule-timer", "durable": "duetime",
                        "create_stream": true, "mapping": "schedule_timer"},
      "notifications": {"kind": "redis", "url": "redis://redis:6379/0",
                        "stream": "schedule-event", "group": "scheduling-worker",
                        "mapping": "schedule_event", "acceptance_window": "PT5M"}
    }

Options per kind (``*`` = required):

- ``nats``: ``url``\\* (one URL or a list), ``subject``\\* (wildcards allowed),
  ``durable`` (consumer name, default ``duetime``), ``stream`` (default: the stream capturing
  the subject), ``create_stream`` (default false), ``dead_subject`` (default
  ``<subject>.dead``), ``batch`` (100), ``fetch_timeout`` (1 s), ``retry_delay`` (5 s),
  ``ack_wait`` (30 s), ``max_deliver`` (unlimited), ``timeout`` (5 s), ``credentials``.
- ``redis``: ``url``\\*, ``stream``\\*, ``group`` (default ``duetime``), ``consumer`` (default
  ``<host>-<pid>``), ``dead_stream`` (default ``<stream>:dead``), ``field`` (the entry field
  holding the JSON, default ``body``), ``batch`` (100), ``block`` (1 s), ``claim_idle`` (60 s),
  ``retry_delay`` (5 s), ``start_id`` (``0``), ``timeout`` (5 s).
- every kind: ``mapping`` (``timer`` | ``schedule_timer`` | ``schedule_event``, default
  ``timer``), ``type`` (the event type for ``schedule_timer``/``schedule_event``),
  ``acceptance_window`` (``schedule_event``), ``on_conflict`` (``update`` | ``keep`` |
  ``error``, default ``update``).

Every mistake is an :class:`~duetime.errors.InvalidInput` whose ``field`` is the path to fix,
e.g. ``sources.service-calls.subject``; unknown options are refused (a typo is not ignored).
This module imports no broker library, so configuration is checked where none is installed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from duetime.bus.options import Option, at, check_against, parse_named, redacted, split_spec
from duetime.destinations.base import check_name, check_timeout
from duetime.destinations.config import check_nats_urls, check_path, check_redis_url
from duetime.destinations.kafka_options import (
    SECRET_OPTIONS,
    SECURITY,
    check_choice,
    check_servers,
    check_topic,
)
from duetime.errors import InvalidInput
from duetime.model import JSON
from duetime.sources.base import (
    ON_CONFLICT,
    ScheduleCommand,
    check_accept_within,
    check_count,
    check_seconds,
)
from duetime.sources.checks import (
    check_dead_subject,
    check_durable,
    check_plain,
    check_source_subject,
    check_start_id,
    check_stream_name,
)
from duetime.sources.mappings import MAPPINGS, renamed
from duetime.validation import check_expires_after, check_type

Kind = Literal["nats", "redis", "kafka"]
KINDS: tuple[Kind, ...] = get_args(Kind)

_MAPPING_OPTIONS = ("mapping", "type", "acceptance_window", "on_conflict", "accept_within")


def check_bool(value: object, field: str) -> bool:
    """A JSON boolean: ``"false"`` as a string would be truthy, so it is refused."""
    if not isinstance(value, bool):
        raise InvalidInput(field, f"expected true or false, got {value!r}")
    return value


def check_mapping(value: object, field: str = "mapping") -> str:
    """One of the built-in mappings, by name."""
    if value not in MAPPINGS:
        raise InvalidInput(field, f"unknown mapping {value!r}; expected one of {MAPPINGS}")
    return str(value)


def check_on_conflict(value: object, field: str = "on_conflict") -> str:
    """What storing an existing key does: ``update``, ``keep`` or ``error``."""
    if value not in ON_CONFLICT:
        raise InvalidInput(field, f"must be one of {', '.join(ON_CONFLICT)}")
    return str(value)


def _seconds(maximum: float, minimum: float = 0.0) -> Callable[[object, str], float]:
    def check(value: object, field: str) -> float:
        return check_seconds(value, field, minimum=minimum, maximum=maximum)

    return check


def _count(maximum: int) -> Callable[[object, str], int]:
    def check(value: object, field: str) -> int:
        return check_count(value, field, maximum=maximum)

    return check


def _plain(what: str) -> Callable[[object, str], str]:
    def check(value: object, field: str) -> str:
        return check_plain(value, field, what=what)

    return check


def _accept_within(value: object, field: str) -> object:
    check_accept_within(value, field)
    return value


def _window(value: object, field: str) -> object:
    check_expires_after(value, field)
    return value


_COMMON: Mapping[str, Option] = {
    "mapping": Option(check_mapping),
    "type": Option(check_type),
    "acceptance_window": Option(_window),
    "on_conflict": Option(check_on_conflict),
    "accept_within": Option(_accept_within),
}

SCHEMAS: Mapping[Kind, Mapping[str, Option]] = {
    "nats": {
        "url": Option(check_nats_urls, required=True),
        "subject": Option(check_source_subject, required=True),
        "durable": Option(check_durable),
        "stream": Option(check_stream_name),
        "create_stream": Option(check_bool),
        "dead_subject": Option(check_dead_subject),
        "batch": Option(_count(10_000)),
        "fetch_timeout": Option(_seconds(60)),
        "retry_delay": Option(_seconds(3600)),
        "ack_wait": Option(_seconds(3600, 0.5)),
        "max_deliver": Option(_count(1_000_000)),
        "timeout": Option(check_timeout),
        "credentials": Option(check_path),
        **_COMMON,
    },
    "redis": {
        "url": Option(check_redis_url, required=True),
        "stream": Option(_plain("stream"), required=True),
        "group": Option(_plain("consumer group")),
        "consumer": Option(_plain("consumer")),
        "dead_stream": Option(_plain("stream")),
        "field": Option(_plain("field")),
        "batch": Option(_count(10_000)),
        "block": Option(_seconds(60)),
        "claim_idle": Option(_seconds(86400)),
        "retry_delay": Option(_seconds(3600)),
        "start_id": Option(check_start_id),
        "timeout": Option(check_timeout),
        **_COMMON,
    },
    "kafka": {
        "bootstrap_servers": Option(check_servers, required=True),
        "topic": Option(check_topic, required=True),
        "group": Option(_plain("consumer group")),
        "dead_topic": Option(check_topic),
        "batch": Option(_count(10_000)),
        "poll_timeout": Option(_seconds(60)),
        "retry_delay": Option(_seconds(3600)),
        "start": Option(check_choice(("earliest", "latest"))),
        "timeout": Option(check_timeout),
        **_COMMON,
        **SECURITY,
    },
}


def check_options(kind: Kind, options: Mapping[str, object], path: str = "") -> dict[str, Any]:
    """Check every option of ``kind``: unknown ones are refused, required ones must be there."""
    checked = check_against(SCHEMAS[kind], options, path, kind, "source")
    command_of(checked, path)  # the mapping's options must fit the mapping
    return checked


def command_of(options: Mapping[str, Any], path: str = "") -> ScheduleCommand:
    """The :class:`ScheduleCommand` the mapping options describe."""
    try:
        return ScheduleCommand.named(
            options.get("mapping", "timer"),
            type=options.get("type"),
            acceptance_window=options.get("acceptance_window"),
            on_conflict=options.get("on_conflict", "update"),
            accept_within=options.get("accept_within"),
        )
    except InvalidInput as exc:
        raise renamed(exc, at(path, exc.field or "mapping")) from None


@dataclass(frozen=True, slots=True)
class SourceSpec:
    """A named source of one kind with its checked options: what to build, as data."""

    kind: Kind
    name: str
    options: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, raw: object, *, name: str | None = None, path: str = "") -> SourceSpec:
        """Parse ``{"kind": ..., <options>}`` (with ``"name"`` unless ``name`` is given)."""
        kind, checked_name, options = split_spec(raw, name, path, KINDS, "source", check_name)
        typed: Kind = kind  # type: ignore[assignment]  # split_spec checked it is one of KINDS
        return cls(typed, checked_name, check_options(typed, options, path))

    @property
    def command(self) -> ScheduleCommand:
        """The parser the mapping options describe."""
        return command_of(self.options)

    @property
    def broker_options(self) -> dict[str, Any]:
        """The options the source's constructor takes (the mapping ones become its command)."""
        return {k: v for k, v in self.options.items() if k not in _MAPPING_OPTIONS}

    def to_dict(self) -> dict[str, JSON]:
        """The spec as JSON, the shape :meth:`from_dict` reads, with passwords in URLs hidden."""
        options = redacted(self.options, SECRET_OPTIONS)
        return {"name": self.name, "kind": self.kind, **options}

    def __repr__(self) -> str:
        return f"SourceSpec({self.to_dict()!r})"


def parse_sources(raw: object, path: str = "sources") -> dict[str, SourceSpec]:
    """Parse ``{name: {"kind": ..., <options>}, ...}``; errors name ``<path>.<name>.<option>``."""

    def parse(item: object, name: str, field_path: str) -> SourceSpec:
        return SourceSpec.from_dict(item, name=name, path=field_path)

    return parse_named(raw, path, "source", parse, check_name)
