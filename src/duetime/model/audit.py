"""The audit log's records: who did what to which timers, when, and how many it took.

An operator's action — a cancel, a replay, a delete, an edit, a bulk action, a pause, a limit, a
schedule, a token — is written once it is done, with the actor who asked for it. An actor is
named ``kind:name``, so no two kinds of actor read alike: ``token:<name>`` (an unnamed token is
``token:#<id>``; a token's name may hold no ``:`` and start with no ``#``), ``api:anonymous``
(the REST API with auth off), ``cli:<user>@<host>`` and ``python`` or ``python:<name>``. ``via``
says through what: ``api``, ``console`` (the dashboard, which calls the REST API and says so),
``cli`` or ``python``.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from duetime.model import JSON, TimerFilter, iso
from duetime.model.finding import PayloadMatch
from duetime.model.tokens import TokenInfo

Via = Literal["api", "console", "cli", "python"]

ANONYMOUS = "api:anonymous"
"""The actor of a REST request when the server runs without auth (it trusts only same-origin
requests from its own machine's users, so it cannot tell them apart)."""

ACTOR_KINDS: dict[str, tuple[str, ...]] = {
    "api": ("token", "api"),
    "console": ("token", "api"),
    "cli": ("cli",),
    "python": ("python",),
}
"""The kinds of actor each interface may name; a name without one gets the interface's own."""


@dataclass(frozen=True, slots=True)
class Actor:
    """Who acts, and through what; ``name`` is always ``kind:name`` (or ``python``).

    ``Actor("reconciler")`` is ``python:reconciler``: a name is prefixed with its interface's
    kind unless it already has one that interface may use, so a Python caller cannot read as a
    token or as the CLI."""

    name: str
    via: Via = "python"

    def __post_init__(self) -> None:
        kinds = ACTOR_KINDS[self.via]
        kind, colon, rest = self.name.partition(":")
        if (kind in kinds and colon and rest) or self.name == "python" == self.via:
            return
        own = "api" if self.via == "console" else self.via
        object.__setattr__(self, "name", f"{own}:{self.name}" if self.name else own)

    @classmethod
    def of_token(cls, token: TokenInfo | None, via: Via = "api") -> Actor:
        """``token:<name>`` (``token:#<id>`` when it has none), or ``api:anonymous`` without
        a token (auth off)."""
        if token is None:
            return cls(ANONYMOUS, via)
        return cls(f"token:{token.name or f'#{token.id}'}", via)

    @classmethod
    def cli(cls) -> Actor:
        """``cli:<user>@<host>``: the operating-system user running the command, and where."""
        try:
            user = getpass.getuser()
        except (KeyError, OSError):  # no name for this uid (a bare container)
            user = "unknown"
        return cls(f"cli:{user}@{socket.gethostname()}", "cli")


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """One action to write to the log of ``namespace``."""

    namespace: str
    actor: Actor
    action: str
    target: dict[str, JSON]
    """What it acted on: ``{"key": …}``, ``{"keys": […]}``, ``{"filter": {…}}``,
    ``{"schedule": …}``, ``{"pattern": …}``, ``{"token": …}`` and what else says how."""
    count: int
    """How many things it changed (timers for a bulk action; 1 for one timer or setting)."""


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One action as the log keeps it."""

    id: int
    namespace: str
    at: datetime
    actor: str
    via: str
    action: str
    target: dict[str, JSON]
    count: int

    def to_dict(self) -> dict[str, JSON]:
        return {
            "id": self.id,
            "namespace": self.namespace,
            "at": iso(self.at),
            "actor": self.actor,
            "via": self.via,
            "action": self.action,
            "target": self.target,
            "count": self.count,
        }


MAX_LISTED_KEYS = 20
"""A selection of more keys than this (or longer than :data:`MAX_LISTED_BYTES`) is written as
its count and digest, so an entry stays small whatever a request names."""
MAX_LISTED_BYTES = 1024
MAX_TEXT_BYTES = 256
"""A filter's text (a payload match, a type glob) longer than this is written as its digest."""


def digest(values: Sequence[str]) -> str:
    """SHA-256 (hex) of the values joined by newlines, in their order: anyone holding the list
    can check it is the one the entry means (``printf '%s\\n' … | head -c -1 | sha256sum``)."""
    return hashlib.sha256("\n".join(values).encode("utf-8")).hexdigest()


def keys_target(keys: Sequence[str]) -> JSON:
    """The keys themselves when few and short, else ``{"count": n, "sha256": …}``."""
    listed = list(keys)
    size = len(json.dumps(listed, ensure_ascii=False).encode("utf-8"))
    if len(listed) <= MAX_LISTED_KEYS and size <= MAX_LISTED_BYTES:
        return listed
    return {"count": len(listed), "sha256": digest(listed)}


def text_target(text: str) -> JSON:
    """A text as it is when short, else ``{"length": n, "sha256": …}``."""
    if len(text.encode("utf-8")) <= MAX_TEXT_BYTES:
        return text
    return {"length": len(text), "sha256": digest([text])}


def filter_target(filter: TimerFilter, keys: Sequence[str] | None = None) -> dict[str, JSON]:
    """What a bulk action took, as the log says it: the keys chosen, and every field of the
    filter that narrowed it (instants as they were resolved, so ``P1D`` reads as the day it
    meant; a payload match as ``path=value``; the filter's own selection as ``keys``)."""
    payload = filter.payload
    fields: dict[str, JSON] = {
        "subject": None if filter.subject is None else text_target(filter.subject),
        "status": None if filter.status is None else filter.status.value,
        "type": None if filter.type is None else text_target(filter.type),
        "due_from": iso(filter.due_from),
        "due_until": iso(filter.due_until),
        "payload": None if payload is None else text_target(payload_text(payload)),
        "keys": None if filter.keys is None else keys_target(filter.keys),
    }
    target: dict[str, JSON] = {}
    if keys is not None:
        target["keys"] = keys_target(keys)
    narrowing = {name: value for name, value in fields.items() if value is not None}
    if narrowing or keys is None:
        target["filter"] = narrowing
    return target


def payload_text(match: PayloadMatch) -> str:
    """A payload match as the filter is written: ``path.to.field=value`` (the value as JSON)."""
    return f"{'.'.join(match.path)}={json.dumps(match.value, ensure_ascii=False)}"


FILTER_ORDER = ("subject", "status", "type", "due_from", "due_until", "payload", "keys")
TARGET_ORDER = (
    "key",
    "keys",
    "filter",
    "schedule",
    "schedules",
    "namespace",
    "pattern",
    "limit",
    "token",
    "name",
    "fields",
    "outcome",
)
"""The order a target's fields are told in (PostgreSQL's jsonb keeps no order of its own)."""


def _ordered(fields: dict[str, JSON], order: tuple[str, ...]) -> list[tuple[str, JSON]]:
    rank = {name: index for index, name in enumerate(order)}
    return sorted(fields.items(), key=lambda item: (rank.get(item[0], len(order)), item[0]))


def describe_target(target: dict[str, JSON]) -> str:
    """One line for a table: ``keys a, b`` / ``status=dead type=order.*`` / ``pattern email.*``."""
    parts: list[str] = []
    for name, value in _ordered(target, TARGET_ORDER):
        if name == "filter" and isinstance(value, dict):
            fields = _ordered(value, FILTER_ORDER)
            parts.append(" ".join(f"{k}={_told(v)}" for k, v in fields) or "every timer")
        elif isinstance(value, list):
            parts.append(f"{name} {', '.join(map(str, value))}")
        elif isinstance(value, dict):
            parts.append(f"{name} {_told(value)}")
        else:
            parts.append(f"{name} {value}")
    return "; ".join(parts)


def _told(value: JSON) -> str:
    """A field's value in a table: a list comma-joined, a summary as ``count=… sha256=…``."""
    if isinstance(value, list):
        return ",".join(map(str, value))
    if isinstance(value, dict):
        return " ".join(f"{k}={v}" for k, v in value.items())
    return str(value)
