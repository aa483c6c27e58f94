"""The audit log's records: who did what to which timers, when, and how many it took.

An operator's action — a cancel, a replay, a delete, a bulk action, a pause, a limit, a token —
is written once it is done, with the actor who asked for it: the API token's name (an unnamed
token is ``token #<id>``), or ``local`` for whoever reaches the database without a token (the
CLI on it, or the API with auth off); ``via`` says through what (``api``, ``cli``, ``python``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from duetime.model import JSON, TimerFilter, iso
from duetime.model.tokens import TokenInfo

LOCAL = "local"
"""The actor of an action made without a token: the CLI on the database, the API with auth off."""

Via = Literal["api", "cli", "python"]


@dataclass(frozen=True, slots=True)
class Actor:
    """Who acts, and through what."""

    name: str
    via: Via = "python"

    @classmethod
    def of_token(cls, token: TokenInfo | None, via: Via = "api") -> Actor:
        """The token's name (``token #<id>`` when it has none), or ``local`` without a token."""
        if token is None:
            return cls(LOCAL, via)
        return cls(token.name or f"token #{token.id}", via)


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


def filter_target(filter: TimerFilter, keys: Sequence[str] | None = None) -> dict[str, JSON]:
    """What a bulk action took, as the log says it: the keys chosen, and the filter's fields
    that narrowed it (instants as they were resolved, so ``P1D`` reads as the day it meant)."""
    fields: dict[str, JSON] = {
        "subject": filter.subject,
        "status": None if filter.status is None else filter.status.value,
        "type": filter.type,
        "due_from": iso(filter.due_from),
        "due_until": iso(filter.due_until),
    }
    target: dict[str, JSON] = {}
    if keys is not None:
        target["keys"] = list(keys)
    narrowing = {name: value for name, value in fields.items() if value is not None}
    if narrowing or keys is None:
        target["filter"] = narrowing
    return target


FILTER_ORDER = ("subject", "status", "type", "due_from", "due_until")
TARGET_ORDER = ("key", "keys", "filter", "schedule", "pattern", "limit", "token", "name")
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
            parts.append(" ".join(f"{k}={v}" for k, v in fields) or "every timer")
        elif isinstance(value, list):
            parts.append(f"{name} {', '.join(map(str, value))}")
        elif isinstance(value, dict):
            parts.append(f"{name} " + " ".join(f"{k}={v}" for k, v in value.items()))
        else:
            parts.append(f"{name} {value}")
    return "; ".join(parts)
