"""How an app routes events: destinations by name, and which events go to them.

:func:`add_route` is ``AsyncApp.route``: a route is checked whole before anything of it is kept,
so a refused route adds no destination.
"""

from __future__ import annotations

from collections.abc import Sequence

from duetime.bus.routes import HANDLER, Route, check_pattern
from duetime.destinations.base import Destination, check_name
from duetime.destinations.registry import Destinations
from duetime.errors import CapReached, InvalidInput
from duetime.validation import type_name


def add_route(
    routes: list[Route],
    destinations: Destinations,
    max_routes: int,
    namespace: str,
    type: str,
    to: Destination | str | Sequence[Destination | str],
) -> Route:
    """Append to ``routes`` the route of ``type`` to each destination of ``to`` (see
    ``AsyncApp.route``), adding to ``destinations`` those given that it does not hold."""
    pattern = check_pattern(type)
    if len(routes) >= max_routes:
        where = f"the app of namespace {namespace!r}"
        raise CapReached("type", where, "routes", max_routes, "max_routes")
    items: list[object] = list(to) if isinstance(to, Sequence) and not isinstance(to, str) else [to]
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
            known = destinations.get(name) if name in destinations else None
            if (known or adding.setdefault(name, item)) is not item:
                raise InvalidInput(field, f"another destination is already named {name!r}")
        else:
            raise InvalidInput(field, f"expected a destination or its name, not {type_name(item)}")
        if name == HANDLER:
            raise InvalidInput(
                field,
                f"{HANDLER!r} stands for Python handlers: register one with "
                "@app.handler(type) instead of routing to it",
            )
        names[name] = None
    for destination in adding.values():  # only once the whole route is known to be good
        if destination.name not in destinations:
            destinations.add(destination)
    route = Route(pattern, tuple(names))
    routes.append(route)
    return route
