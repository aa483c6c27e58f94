"""The record of an API token as stored: never the token itself, only what it may do."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from duetime.model import JSON, iso

ALL_NAMESPACES = "*"
"""The scope of a token that may use every namespace."""


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """What is stored about a token: never the token itself, only its hash (kept out of here)."""

    id: int
    name: str | None
    namespaces: tuple[str, ...]
    read_only: bool
    created_at: datetime
    revoked_at: datetime | None = None
    last_used_at: datetime | None = None

    @property
    def all_namespaces(self) -> bool:
        return ALL_NAMESPACES in self.namespaces

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    def can_read(self, namespace: str) -> bool:
        """Whether the token may see ``namespace`` at all (otherwise it looks unknown)."""
        return self.active and (self.all_namespaces or namespace in self.namespaces)

    def can_write(self, namespace: str) -> bool:
        return self.can_read(namespace) and not self.read_only

    def to_dict(self) -> dict[str, JSON]:
        return {
            "id": self.id,
            "name": self.name,
            "namespaces": list(self.namespaces),
            "read_only": self.read_only,
            "created_at": iso(self.created_at),
            "revoked_at": iso(self.revoked_at),
            "last_used_at": iso(self.last_used_at),
        }
