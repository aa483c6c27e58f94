"""Where a worker sends each row it claims: its own subscriptions, and those of the live nodes.

A node's subscriptions (its handler types and its routes, :mod:`duetime.bus.routes`) decide what it
claims; the union of every live node's subscriptions decides where an event goes. That union is
read from the nodes table at start and after each heartbeat, so a node that starts or stops
changes the routing of events claimed from then on (within one heartbeat interval).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta

from duetime.bus.routes import HANDLER, Direct, Fan, Route, claim_filter, plan, subscriptions_of
from duetime.destinations.base import Destination, own_rate
from duetime.destinations.handler import as_handler
from duetime.errors import InvalidInput
from duetime.handlers import Handler, HandlerRegistry
from duetime.model import ClaimFilter, Node, Subscription, Timer

Target = Handler | Fan | None
"""What to do with a claimed row: run this handler on it, fan it out, or (None) nothing can."""


class Dispatch:
    """One worker's routing: what it subscribes to and where each claimed row goes."""

    def __init__(
        self,
        namespace: str,
        node_id: str,
        registry: HandlerRegistry,
        routes: Sequence[Route] = (),
        destinations: Mapping[str, Destination] | None = None,
        *,
        types: Sequence[str] | None = None,
    ) -> None:
        self.namespace = namespace
        self.node_id = node_id
        self.registry = registry
        self.routes = tuple(routes)
        handler_types = registry.types if types is None else list(types)
        self.subscriptions: tuple[Subscription, ...] = subscriptions_of(
            namespace, handler_types, self.routes
        )
        self.claim_filter: ClaimFilter = claim_filter(self.subscriptions)
        self._delivering = _destination_handlers(self.routes, destinations or {})
        self._rated = frozenset(
            name for name, d in (destinations or {}).items() if own_rate(d) is not None
        )
        """Destinations with a rate of their own: their rule governs delivery rows, so an event
        for one of them alone still becomes a delivery row instead of being delivered as is."""
        self._everyone: tuple[Subscription, ...] = self.subscriptions
        self._plans: dict[str, Target] = {}
        self.may_fan_out = _has_routes(self._everyone)
        """False while no live node (this one included) has a route: every event then goes to
        a Python handler as it is, without planning: the single-handler fast path."""

    def refresh(self, nodes: Iterable[Node], now: datetime, fresh: timedelta) -> None:
        """Take the subscriptions of the nodes whose heartbeat is younger than ``fresh``."""
        self._everyone = self.subscriptions + live_subscriptions(
            nodes, self.namespace, now, fresh, exclude=self.node_id
        )
        self._plans = {}
        self.may_fan_out = _has_routes(self._everyone)

    def everyone(self) -> ClaimFilter:
        """What the live nodes claim together, as last refreshed."""
        return claim_filter(self._everyone)

    def everyone_of(self, nodes: Iterable[Node], now: datetime, fresh: timedelta) -> ClaimFilter:
        """What the live ones of ``nodes`` would claim together (pure: nothing is refreshed)."""
        live = live_subscriptions(nodes, self.namespace, now, fresh, exclude=self.node_id)
        return claim_filter(self.subscriptions + live)

    def target(self, timer: Timer) -> Target:
        """Where a claimed row goes: a handler (Python, or one wrapping a destination), a fan-out
        into deliveries (events only), or None when this node cannot deliver it."""
        destination = timer.destination
        if destination is None:
            if not self.may_fan_out:
                return self.registry.get(timer.type)
            target = self._plans.get(timer.type, _UNPLANNED)
            if target is _UNPLANNED:
                target = self._plans[timer.type] = self._plan(timer.type)
            return target
        if destination == HANDLER:
            return self.registry.get(timer.type)
        return self._delivering.get(destination)

    def missing(self, timer: Timer) -> str:
        """Why :meth:`target` found nothing, as a dead letter's reason."""
        if timer.destination is None or timer.destination == HANDLER:
            return f"no handler is registered for event type {timer.type!r}"
        return f"destination {timer.destination!r} is not configured on this node"

    def _plan(self, type: str) -> Target:
        served = [HANDLER] if self.registry.get(type) is not None else []
        served.extend(self._delivering)
        decided = plan(type, self.namespace, self._everyone, served)
        if isinstance(decided, Direct):
            if decided.destination == HANDLER:
                return self.registry.get(type)
            if decided.destination in self._rated:
                return Fan((decided.destination,))
            return self._delivering.get(decided.destination)
        return decided


_UNPLANNED = Fan(())


def live_subscriptions(
    nodes: Iterable[Node],
    namespace: str,
    now: datetime,
    fresh: timedelta,
    *,
    exclude: str | None = None,
) -> tuple[Subscription, ...]:
    """The subscriptions in ``namespace`` of the nodes that heartbeat within ``fresh`` of now."""
    found: list[Subscription] = []
    for node in nodes:
        if node.id == exclude or now - node.heartbeat_at > fresh:
            continue
        found.extend(s for s in node.subscriptions if s.namespace == namespace)
    return tuple(found)


def check_routes(routes: Sequence[Route], destinations: Mapping[str, Destination]) -> None:
    """Every destination a route names must be configured: refuse to start otherwise."""
    for i, route in enumerate(routes):
        for j, name in enumerate(route.to):
            if name not in destinations:
                known = ", ".join(sorted(destinations)) or "none"
                raise InvalidInput(
                    f"routes[{i}].to[{j}]",
                    f"no destination is named {name!r} (configured: {known})",
                )


def _destination_handlers(
    routes: Sequence[Route], destinations: Mapping[str, Destination]
) -> dict[str, Handler]:
    """A handler per destination the routes name: delivers, turning failures into outcomes."""
    check_routes(routes, destinations)
    names = dict.fromkeys(name for route in routes for name in route.to)
    return {
        name: Handler(name, as_handler(destinations[name]), True, destination=name)
        for name in names
    }


def _has_routes(subscriptions: Iterable[Subscription]) -> bool:
    return any(d != HANDLER for s in subscriptions for d in s.destinations)
