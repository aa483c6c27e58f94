"""Option sets checked against a schema: the options of a destination or a source kind.

Each kind has a schema: option name → :class:`Option` (how to check the value, whether it must
be given). :func:`check_against` refuses unknown options, enforces required ones and runs every
check, and each error names the field by its full path (``destinations.hooks.url``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from duetime.errors import InvalidInput


@dataclass(frozen=True, slots=True)
class Option:
    """One option of a kind: how to check it, and whether it must be given."""

    check: Callable[[object, str], Any]
    required: bool = False


def at(path: str, name: str) -> str:
    """The field path of ``name`` under ``path`` (``path`` empty: the name alone)."""
    return f"{path}.{name}" if path else name


def check_against(
    schema: Mapping[str, Option], options: Mapping[str, object], path: str, kind: str, noun: str
) -> dict[str, Any]:
    """The checked values of ``options`` for a ``kind`` of ``noun`` (``"nats"``,
    ``"source"``); options given as None are dropped."""
    checked: dict[str, Any] = {}
    for name, value in options.items():
        option = schema.get(name)
        if option is None:
            known = ", ".join(sorted(schema))
            raise InvalidInput(at(path, name), f"unknown option for {kind}; expected: {known}")
        if value is not None:
            checked[name] = option.check(value, at(path, name))
    for name, option in schema.items():
        if option.required and name not in checked:
            raise InvalidInput(at(path, name), f"is required for a {kind} {noun}")
    return checked
