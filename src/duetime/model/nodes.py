"""A running duetime process as the store lists it, and what it takes of each namespace."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from duetime.model.instants import iso

JSON = Any


@dataclass(frozen=True, slots=True)
class Subscription:
    """What a node takes of one namespace: events whose type matches ``pattern`` (an exact type
    or a glob such as ``order.*``), for ``destinations`` (``handler`` = its Python handler)."""

    namespace: str
    pattern: str
    destinations: tuple[str, ...]

    def to_dict(self) -> dict[str, JSON]:
        return {"namespace": self.namespace, "type": self.pattern, "to": list(self.destinations)}

    @classmethod
    def from_dict(cls, data: Any) -> Subscription:
        return cls(data["namespace"], data["type"], tuple(data["to"]))


@dataclass(frozen=True, slots=True)
class Node:
    """A running duetime process, alive while its heartbeat is fresh."""

    id: str
    host: str
    pid: int
    started_at: datetime
    heartbeat_at: datetime
    role: str = "worker"
    in_flight: int = 0
    subscriptions: tuple[Subscription, ...] = ()
    clock_offset: timedelta | None = None
    """The database's clock minus the node's wall clock at its last heartbeat (None: unknown,
    or the database runs on the node's own clock)."""

    def to_dict(self) -> dict[str, JSON]:
        return {
            "id": self.id,
            "host": self.host,
            "pid": self.pid,
            "role": self.role,
            "started_at": iso(self.started_at),
            "heartbeat_at": iso(self.heartbeat_at),
            "in_flight": self.in_flight,
            "subscriptions": [s.to_dict() for s in self.subscriptions],
            "clock_offset_ms": (
                None if self.clock_offset is None else self.clock_offset.total_seconds() * 1000
            ),
        }
