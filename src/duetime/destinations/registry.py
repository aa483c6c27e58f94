"""Build destinations from their specs, importing a broker's client only when it is used.

``nats-py``, ``redis`` and ``aio-pika`` are optional (``pip install 'duetime[brokers]'``), and so
is ``confluent-kafka`` (``duetime[kafka]``): a
process that only sends webhooks never imports them, and one that is configured for a broker
without its client gets a clear error naming the missing package, at start-up.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, assert_never

from duetime.destinations.base import Destination
from duetime.destinations.config import (
    DestinationSpec,
    Kind,
    check_kind_options,
    resolve_kind,
)
from duetime.errors import InvalidInput, NotFound

log = logging.getLogger("duetime.destinations")

_CLIENT_PACKAGES: dict[Kind, str] = {
    "nats": "nats-py",
    "redis": "redis",
    "rabbitmq": "aio-pika",
    "kafka": "confluent-kafka",
}


def build_destination(spec: DestinationSpec, env: Mapping[str, str] | None = None) -> Destination:
    """The destination ``spec`` describes; ``secret_env`` is read from ``env`` (the process's).

    A kind neither built in nor installed as a plugin is an error naming
    ``destinations.<name>.kind``. Nothing connects yet: destinations connect on their first
    delivery.
    """
    environ = os.environ if env is None else env
    resolved = resolve_kind(spec.kind, f"destinations.{spec.name}.kind")
    options = check_kind_options(resolved, spec.kind, spec.options, "")
    if not isinstance(resolved, str):
        return resolved.build(spec.name, options, environ)
    try:
        return _build_builtin(resolved, spec.name, options, environ)
    except ImportError as exc:
        package = _CLIENT_PACKAGES.get(resolved, exc.name or "?")
        extra = "kafka" if resolved == "kafka" else "brokers"
        raise InvalidInput(
            f"destinations.{spec.name}.kind",
            f"{resolved} destinations need the {package!r} package: pip install 'duetime[{extra}]'",
        ) from exc


def _build_builtin(
    kind: Kind, name: str, options: dict[str, Any], env: Mapping[str, str]
) -> Destination:
    """A built-in kind, each named once: a kind added to ``Kind`` and not here fails mypy."""
    match kind:
        case "webhook":
            from duetime.destinations.webhook import WebhookDestination

            secret_env = options.pop("secret_env", None)
            if secret_env is not None:
                options["secret"] = _secret_from_env(secret_env, env)
            return WebhookDestination(name, **options)
        case "nats":
            from duetime.destinations.nats import NatsDestination

            return NatsDestination(name, **options)
        case "redis":
            from duetime.destinations.redis_stream import RedisStreamDestination

            return RedisStreamDestination(name, **options)
        case "rabbitmq":
            from duetime.destinations.rabbitmq import RabbitMQDestination

            return RabbitMQDestination(name, **options)
        case "kafka":
            from duetime.destinations.kafka import KafkaDestination

            return KafkaDestination(name, env=env, **options)
        case _:
            assert_never(kind)


def _secret_from_env(name: str, env: Mapping[str, str]) -> str:
    from duetime.destinations.config import check_secret

    value = env.get(name)
    if not value:
        raise InvalidInput("secret_env", f"environment variable {name} is not set")
    secret = check_secret(value, f"secret_env ({name})")
    assert secret is not None
    return secret


class Destinations:
    """The destinations of one process, by name; closing it closes every one of them."""

    def __init__(self, destinations: Iterable[Destination] = ()) -> None:
        self._by_name: dict[str, Destination] = {}
        for destination in destinations:
            self.add(destination)

    @classmethod
    def from_specs(
        cls, specs: Iterable[DestinationSpec], env: Mapping[str, str] | None = None
    ) -> Destinations:
        """Build every spec; a bad one fails here, before any delivery is attempted."""
        return cls(build_destination(spec, env) for spec in specs)

    def add(self, destination: Destination) -> None:
        if destination.name in self._by_name:
            raise InvalidInput("name", f"a destination named {destination.name!r} already exists")
        self._by_name[destination.name] = destination

    def get(self, name: str) -> Destination:
        try:
            return self._by_name[name]
        except KeyError:
            raise NotFound(f"no destination is named {name!r}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self) -> Iterator[Destination]:
        return iter(list(self._by_name.values()))

    def __len__(self) -> int:
        return len(self._by_name)

    async def close(self) -> None:
        """Close all, concurrently; one failing to close does not keep the others open."""
        destinations = list(self._by_name.values())
        results = await asyncio.gather(*(d.close() for d in destinations), return_exceptions=True)
        for destination, result in zip(destinations, results, strict=True):
            if isinstance(result, BaseException):
                log.warning("closing destination %s failed: %r", destination.name, result)

    async def __aenter__(self) -> Destinations:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
