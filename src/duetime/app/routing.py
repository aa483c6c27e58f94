"""The routes part of the facade: destinations by name, and which events go to them.

:class:`RouteMethods` is mixed into :class:`duetime.app.facade.AsyncApp`. A route is checked
whole before anything of it is kept, so a refused route adds no destination.
"""

from __future__ import annotations

from collections.abc import Sequence

from duetime.bus.routes import HANDLER, Route, check_pattern
from duetime.config import Settings
from duetime.destinations.base import Destination, check_name
from duetime.destinations.registry import Destinations
from duetime.dispatch import check_routes
from duetime.errors import CapReached, InvalidInput
from duetime.validation import type_name


class RouteMethods:
    """Add destinations, and route event types to them."""

    settings: Settings
    namespace: str
    destinations: Destinations
    routes: list[Route]

    def add_destination(self, destination: Destination) -> Destination:
        """Make ``destination`` (a webhook, a broker…) available to routes by its name."""
        self.destinations.add(destination)
        return destination

    def route(self, type: str, *, to: Destination | str | Sequence[Destination | str]) -> Route:
        """Send events whose type matches ``type`` (exact, or a glob such as ``order.*``) to
        each destination of ``to``: destinations, or names of ones added with
        :meth:`add_destination` (a destination given here is added).

        The worker of this app then claims those events (and their deliveries to these
        destinations); an event several destinations want, across every live node's handlers
        and routes, fans out into one delivery per destination, each retried and dead-lettered
        on its own. Names are checked when the worker is made: an unknown one is refused. An
        app has at most ``max_routes`` routes (every node's subscriptions carry them).
        """
        pattern = check_pattern(type)
        cap = self.settings.max_routes
        if len(self.routes) >= cap:
            where = f"the app of namespace {self.namespace!r}"
            raise CapReached("type", where, "routes", cap, "max_routes")
        items: list[object] = (
            list(to) if isinstance(to, Sequence) and not isinstance(to, str) else [to]
        )
        if not items:
            raise InvalidInput("to", "name at least one destination")
        names: dict[str, None] = {}
        adding: dict[str, Destination] = {}
        for index, item in enumerate(items):
            field = f"to[{index}]"
            if isinstance(item, str):
                name = check_name(item, field)
            elif isinstance(item, Destination):
                name = check_name(item.name, field)
                known = self.destinations.get(name) if name in self.destinations else None
                if (known or adding.setdefault(name, item)) is not item:
                    raise InvalidInput(field, f"another destination is already named {name!r}")
            else:
                raise InvalidInput(
                    field, f"expected a destination or its name, not {type_name(item)}"
                )
            if name == HANDLER:
                raise InvalidInput(
                    field,
                    f"{HANDLER!r} stands for Python handlers: register one with "
                    "@app.handler(type) instead of routing to it",
                )
            names[name] = None
        for destination in adding.values():  # only once the whole route is known to be good
            if destination.name not in self.destinations:
                self.destinations.add(destination)
        route = Route(pattern, tuple(names))
        self.routes.append(route)
        return route

    def check_routes(self) -> None:
        """InvalidInput naming ``routes[i].to[j]`` when a route names no added destination."""
        check_routes(self.routes, {d.name: d for d in self.destinations})
