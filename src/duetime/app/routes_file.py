"""The routes file: destinations and routes as JSON, for ``duetime worker|serve|tick --routes``.

::

    {
      "destinations": {
        "billing-hook": {"kind": "webhook", "url": "https://billing.example/hooks",
                         "secret_env": "BILLING_HOOK_SECRET"},
        "bus": {"kind": "nats", "url": "nats://127.0.0.1:4222", "subject": "events.{type}"}
      },
      "routes": [
        {"namespace": "default", "type": "order.*", "to": ["billing-hook", "bus"]},
        {"type": "user.created", "to": ["bus"]}
      ]
    }

``destinations`` is what :func:`duetime.destinations.parse_destinations` reads. Each route has a
``type`` (an event type, or a glob such as ``order.*``), ``to`` (destination names, at least one)
and optionally ``namespace`` (default: the namespace the process works in). Every mistake is an
:class:`~duetime.errors.InvalidInput` whose field is the path to fix (``routes[0].to[1]``,
``destinations.bus.subject``); a route naming a destination the file does not define is one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from duetime.app.facade import AsyncApp
from duetime.bus.routes import HANDLER, check_pattern
from duetime.destinations.base import check_name
from duetime.destinations.config import DestinationSpec, parse_destinations
from duetime.destinations.registry import build_destination
from duetime.errors import InvalidInput
from duetime.validation import check_namespace, parse_json_text

_TOP = ("destinations", "routes")
_ROUTE = ("namespace", "type", "to")


@dataclass(frozen=True, slots=True)
class RouteSpec:
    """One route of the file; ``namespace`` None means the process's own namespace."""

    namespace: str | None
    pattern: str
    to: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RoutesFile:
    destinations: Mapping[str, DestinationSpec]
    routes: tuple[RouteSpec, ...]

    def namespaces(self, default: str) -> list[str]:
        """The namespaces the routes are for, in order of first mention."""
        return list(dict.fromkeys(r.namespace or default for r in self.routes))

    def routes_for(self, namespace: str, default: str) -> list[RouteSpec]:
        return [r for r in self.routes if (r.namespace or default) == namespace]


def parse_routes_file(raw: object) -> RoutesFile:
    """Check the whole document; InvalidInput naming the path of the first mistake."""
    if not isinstance(raw, Mapping):
        raise InvalidInput("routes file", "expected a JSON object with destinations and routes")
    for key in raw:
        if key not in _TOP:
            raise InvalidInput(str(key), f"is not a known field; expected: {', '.join(_TOP)}")
    destinations = parse_destinations(raw.get("destinations", {}))
    items = raw.get("routes")
    if not isinstance(items, list) or not items:
        raise InvalidInput("routes", "expected a non-empty list of routes")
    routes = tuple(_route(item, f"routes[{i}]", destinations) for i, item in enumerate(items))
    return RoutesFile(destinations, routes)


def _route(raw: object, path: str, destinations: Mapping[str, DestinationSpec]) -> RouteSpec:
    if not isinstance(raw, Mapping):
        raise InvalidInput(path, 'expected an object like {"type": "order.*", "to": ["hook"]}')
    for key in raw:
        if key not in _ROUTE:
            raise InvalidInput(
                f"{path}.{key}", f"is not a known field; expected: {', '.join(_ROUTE)}"
            )
    namespace = raw.get("namespace")
    if namespace is not None:
        check_namespace(namespace, f"{path}.namespace")
    if "type" not in raw:
        raise InvalidInput(f"{path}.type", "is required: an event type or a glob like 'order.*'")
    pattern = check_pattern(raw["type"], f"{path}.type")
    to = raw.get("to")
    if not isinstance(to, list) or not to:
        raise InvalidInput(f"{path}.to", "expected a non-empty list of destination names")
    names: dict[str, None] = {}
    for j, name in enumerate(to):
        field = f"{path}.to[{j}]"
        check_name(name, field)
        if name == HANDLER:
            raise InvalidInput(field, f"{HANDLER!r} stands for Python handlers: use --app")
        if name not in destinations:
            known = ", ".join(sorted(destinations)) or "none"
            raise InvalidInput(field, f"no destination is named {name!r} (defined: {known})")
        names[name] = None
    return RouteSpec(namespace, pattern, tuple(names))


def routes_from_json(text: str) -> RoutesFile:
    return parse_routes_file(parse_json_text(text, "routes"))


def read_routes(value: str) -> RoutesFile:
    """``--routes``: a file path, or the JSON itself when it starts with ``{``."""
    if value.lstrip().startswith("{"):
        return routes_from_json(value)
    try:
        text = Path(value).read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidInput("routes", f"cannot read {value}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise InvalidInput("routes", f"{value} is not UTF-8 text") from None
    return routes_from_json(text)


def apply_routes(
    app: AsyncApp, routes: RoutesFile, env: Mapping[str, str] | None = None
) -> Sequence[RouteSpec]:
    """Add to ``app`` the routes of its namespace and the destinations they name (built now:
    a missing secret or broker client fails here, at start). Returns the routes applied."""
    mine = routes.routes_for(app.namespace, app.namespace)
    for spec in mine:
        for name in spec.to:
            if name not in app.destinations:
                app.add_destination(build_destination(routes.destinations[name], env))
        app.route(spec.pattern, to=list(spec.to))
    return mine
