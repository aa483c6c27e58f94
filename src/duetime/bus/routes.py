"""Routes and subscriptions, as pure functions: which events a node takes, and where each goes.

A node subscribes to event types: one exact type per Python handler (destination ``handler``)
and one pattern per route (``order.*`` → ``billing-hook``, ``bus``). A pattern is an event type,
or one in which ``*`` stands for any run of characters (none included): ``order.*`` matches
``order.paid`` and ``order.paid.v2`` but not ``order``; ``*`` matches every type.

An event of type T goes to the union of the destinations of every live node's subscriptions
that match T (:func:`destinations_for`). When that is one destination this node serves, the
event is delivered as it is; otherwise it fans out into one delivery row per destination, keyed
``<event key>@<destination>`` (:func:`delivery_key`), each retried and dead-lettered on its own.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from duetime.errors import InvalidInput
from duetime.model import ClaimFilter, Subscription
from duetime.model.deliveries import DELIVERY_SEPARATOR as DELIVERY_SEPARATOR
from duetime.model.deliveries import delivery_key as delivery_key
from duetime.model.deliveries import event_key as event_key
from duetime.model.deliveries import fan_out_note as fan_out_note
from duetime.validation import MAX_TYPE_LENGTH

HANDLER = "handler"
"""The destination name of Python handlers; reserved, so no configured destination takes it."""

_PATTERN = re.compile(r"[A-Za-z0-9_*][A-Za-z0-9_.:/*-]*")


@dataclass(frozen=True, slots=True)
class Route:
    """Events whose type matches ``pattern`` go to each of the destinations named in ``to``."""

    pattern: str
    to: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Direct:
    """Deliver the event itself to its one destination, which this node serves."""

    destination: str


@dataclass(frozen=True, slots=True)
class Fan:
    """Hand the event on as one delivery per destination."""

    destinations: tuple[str, ...]


Plan = Direct | Fan


def check_pattern(value: object, field: str = "type") -> str:
    """An event type, or one with ``*`` wildcards; InvalidInput naming ``field`` otherwise."""
    if not isinstance(value, str) or not value:
        raise InvalidInput(field, "an event type or pattern is required, e.g. 'order.*'")
    if len(value) > MAX_TYPE_LENGTH or not _PATTERN.fullmatch(value):
        raise InvalidInput(
            field,
            f"{value[:50]!r} is not an event type pattern: letters, digits and _ . : / -, "
            f"with * for any characters (e.g. 'order.*'; at most {MAX_TYPE_LENGTH})",
        )
    return value


def is_glob(pattern: str) -> bool:
    return "*" in pattern


@functools.lru_cache(maxsize=1024)
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")), re.DOTALL)


def matches(pattern: str, type: str) -> bool:
    """Whether the event type ``type`` matches ``pattern`` (an exact type or a glob)."""
    if "*" not in pattern:
        return pattern == type
    return _regex(pattern).fullmatch(type) is not None


def subscriptions_of(
    namespace: str, handler_types: Iterable[str], routes: Iterable[Route]
) -> tuple[Subscription, ...]:
    """A node's subscriptions: each handler type for ``handler``, then each route."""
    subscriptions = [Subscription(namespace, type, (HANDLER,)) for type in handler_types]
    subscriptions.extend(Subscription(namespace, r.pattern, r.to) for r in routes)
    return tuple(subscriptions)


def claim_filter(subscriptions: Iterable[Subscription]) -> ClaimFilter:
    """What these subscriptions claim: events of a matching type, deliveries they serve.

    A ``handler`` delivery is claimed only for the exact types the handlers are for; a delivery
    to a named destination whatever its type (a name means the same destination everywhere).
    """
    types: dict[str, None] = {}
    patterns: dict[str, None] = {}
    destinations: dict[str, None] = {}
    handler_types: dict[str, None] = {}
    for subscription in subscriptions:
        pattern = subscription.pattern
        (patterns if is_glob(pattern) else types)[pattern] = None
        for destination in subscription.destinations:
            if destination != HANDLER:
                destinations[destination] = None
            elif not is_glob(pattern):
                handler_types[pattern] = None
    return ClaimFilter(tuple(types), tuple(patterns), tuple(destinations), tuple(handler_types))


def claims(claim: ClaimFilter, type: str, destination: str | None) -> bool:
    """Whether a pending row of ``type`` (for ``destination``, None for an event) is claimed
    under ``claim`` — the rule the stores' SQL applies, for tests and in-memory checks."""
    if destination is None:
        return type in claim.types or any(matches(p, type) for p in claim.patterns)
    if destination in claim.destinations:
        return True
    return destination == HANDLER and type in claim.handler_types


def destinations_for(
    type: str, namespace: str, subscriptions: Iterable[Subscription]
) -> tuple[str, ...]:
    """Every destination an event of ``type`` in ``namespace`` goes to: ``handler`` first, then
    the others by name (a stable order, so every node fans out alike)."""
    found: set[str] = set()
    for subscription in subscriptions:
        if subscription.namespace == namespace and matches(subscription.pattern, type):
            found.update(subscription.destinations)
    return tuple(sorted(found, key=lambda name: (name != HANDLER, name)))


def plan(
    type: str,
    namespace: str,
    everyone: Iterable[Subscription],
    served: Sequence[str] | frozenset[str],
) -> Plan:
    """How a node that claimed an event of ``type`` hands it on.

    ``everyone`` is the live nodes' subscriptions (this node's included); ``served`` the
    destinations this node can deliver this type to. One destination that it serves: the event
    is delivered as it is (no extra rows). Anything else fans out — also a single destination
    served elsewhere only, which this node cannot deliver to.
    """
    destinations = destinations_for(type, namespace, everyone)
    if len(destinations) == 1 and destinations[0] in served:
        return Direct(destinations[0])
    if not destinations:  # claimed without subscribing (claim everything): deliver or refuse
        return Direct(HANDLER)
    return Fan(destinations)


def describe(subscriptions: Sequence[Subscription]) -> str:
    """``ns: order.* → billing-hook, bus; user.created → handler`` for tables and logs."""
    parts = [f"{s.pattern} → {', '.join(s.destinations)}" for s in subscriptions]
    namespaces = sorted({s.namespace for s in subscriptions})
    if len(namespaces) == 1:
        return f"{namespaces[0]}: " + "; ".join(parts)
    return "; ".join(f"{s.namespace}: {p}" for s, p in zip(subscriptions, parts, strict=True))
