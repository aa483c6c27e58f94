"""Option sets checked against a schema: the options of a destination or a source kind.

Each kind has a schema: option name → :class:`Option` (how to check the value, whether it must
be given). :func:`check_against` refuses unknown options, enforces required ones and runs every
check, and each error names the field by its full path (``destinations.hooks.url``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from duetime.errors import InvalidInput
from duetime.support.redaction import redact_url

T = TypeVar("T")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


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


def check_env_name(value: object, field: str) -> str:
    """The name of an environment variable (one that holds a secret, kept out of config)."""
    if not isinstance(value, str) or not _ENV_NAME.fullmatch(value):
        raise InvalidInput(field, f"{value!r} is not an environment variable name")
    return value


def split_spec(
    raw: object,
    name: str | None,
    path: str,
    kinds: tuple[str, ...],
    noun: str,
    check_name: Callable[[object, str], str],
) -> tuple[str, str, dict[str, object]]:
    """``{"kind": ..., "name"?: ..., <options>}`` → (kind, name, options), each checked.

    The shape every configured source and destination shares; ``name`` wins over the object's.
    """
    if not isinstance(raw, Mapping):
        raise InvalidInput(path or noun, "expected an object with a 'kind'")
    checked_name = check_name(raw.get("name") if name is None else name, at(path, "name"))
    if "kind" not in raw:
        raise InvalidInput(at(path, "kind"), f"is required; one of {kinds}")
    kind = raw["kind"]
    if kind not in kinds:
        raise InvalidInput(
            at(path, "kind"), f"unknown {noun} kind {kind!r}; expected one of {kinds}"
        )
    options = {k: v for k, v in raw.items() if k not in ("kind", "name")}
    for key in options:
        if not isinstance(key, str):
            raise InvalidInput(path or noun, f"option names are strings, not {key!r}")
    return str(kind), checked_name, options


def parse_named(
    raw: object,
    path: str,
    noun: str,
    parse: Callable[[object, str, str], T],
    check_name: Callable[[object, str], str],
) -> dict[str, T]:
    """``{name: {...}, ...}`` → ``{name: parse(item, name, path.name)}``, names checked."""
    if not isinstance(raw, Mapping):
        raise InvalidInput(path, f"expected an object of {noun} name → {noun}")
    parsed: dict[str, T] = {}
    for name, item in raw.items():
        field_path = at(path, str(name))
        checked = check_name(name, field_path)
        parsed[checked] = parse(item, checked, field_path)
    return parsed


def redacted(options: Mapping[str, Any], secrets: frozenset[str]) -> dict[str, Any]:
    """``options`` with secret values as ``***`` and passwords in ``url`` (one or a list) hidden."""
    shown = {k: "***" if k in secrets else v for k, v in options.items()}
    url = shown.get("url")
    if isinstance(url, str):
        shown["url"] = redact_url(url)
    elif isinstance(url, list):
        shown["url"] = [redact_url(u) for u in url]
    return shown
