"""Destination kinds from other packages, found through the ``duetime.destinations`` entry points.

A package adds a kind by naming an object in its metadata::

    [project.entry-points."duetime.destinations"]
    sqs = "duetime_sqs:plugin"

The entry point's name is the kind (``{"kind": "sqs", ...}`` in a routes file) and the object it
loads is a :class:`DestinationPlugin`. Built-in kinds keep their names: a plugin cannot replace
one. Entry points are read when configuration is checked, so a package installed later is seen
by the next process without any registration call.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Protocol, runtime_checkable

from duetime.bus.options import Option
from duetime.destinations.base import Destination
from duetime.errors import InvalidInput

GROUP = "duetime.destinations"

log = logging.getLogger("duetime.destinations")


@runtime_checkable
class DestinationPlugin(Protocol):
    """What a ``duetime.destinations`` entry point loads: a kind's options and how to build one.

    ``options`` is the kind's schema, option name → :class:`~duetime.bus.options.Option`; every
    kind also takes ``format``, ``ce_source``, ``rate`` and ``burst``, so a plugin does not list
    them. Unknown options are refused and each check's error names its field
    (``destinations.<name>.<option>``) before ``build`` is called.
    """

    options: Mapping[str, Option]

    def build(self, name: str, options: dict[str, Any], env: Mapping[str, str]) -> Destination:
        """The destination ``name`` with its checked ``options``; ``env`` holds the secrets.

        Nothing should connect yet: destinations connect on their first delivery.
        """
        ...


def plugin_entry_points(builtin: tuple[str, ...]) -> dict[str, EntryPoint]:
    """The installed plugins by kind, those named like a built-in kind left out (and logged)."""
    found: dict[str, EntryPoint] = {}
    for point in entry_points(group=GROUP):
        if point.name in builtin:
            log.warning(
                "ignoring the destination plugin %s (%s): %r is a built-in kind",
                point.name,
                point.value,
                point.name,
            )
            continue
        found.setdefault(point.name, point)
    return found


def load_plugin(point: EntryPoint, field: str) -> DestinationPlugin:
    """The plugin ``point`` names; one that cannot be loaded or is not a plugin is an error."""
    try:
        plugin = point.load()
    except Exception as exc:
        raise InvalidInput(
            field, f"the destination plugin {point.name!r} ({point.value}) cannot be loaded: {exc}"
        ) from exc
    if not isinstance(plugin, DestinationPlugin):
        raise InvalidInput(
            field,
            f"the destination plugin {point.name!r} ({point.value}) has no 'options' and "
            "'build(name, options, env)'",
        )
    return plugin
