"""What a backfill of a schedule did, or would do (a dry run)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from duetime.model import JSON, iso


@dataclass(frozen=True, slots=True)
class BackfillOccurrence:
    """One occurrence of the range: its nominal instant, its key, and whether a timer holds
    that key already (made by the materialiser, an earlier backfill, or run already)."""

    due_at: datetime
    key: str
    existed: bool

    def to_dict(self) -> dict[str, JSON]:
        return {"due_at": iso(self.due_at), "key": self.key, "existed": self.existed}


@dataclass(frozen=True, slots=True)
class Backfill:
    """A backfill of schedule ``name`` over ``[start, end]``: the occurrences the rule had there,
    how many timers it created and how many it found already stored (kept as they were)."""

    name: str
    start: datetime
    end: datetime
    dry_run: bool
    occurrences: tuple[BackfillOccurrence, ...]
    created: int
    existing: int

    def to_dict(self) -> dict[str, JSON]:
        return {
            "schedule": self.name,
            "from": iso(self.start),
            "to": iso(self.end),
            "dry_run": self.dry_run,
            "occurrences": [o.to_dict() for o in self.occurrences],
            "count": len(self.occurrences),
            "created": self.created,
            "existing": self.existing,
        }
