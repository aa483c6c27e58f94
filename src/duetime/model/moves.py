"""A timer's moves: each time new zone rules changed the instant of its local wall-clock time.

A local-form timer ("09:00 in New York") keeps its wall time when a tz data release changes the
zone's rules, so its UTC instant moves. The move is part of the timer's history, beside its
attempts: an operator asking why a timer fired an hour later than first shown finds the release
that moved it, the wall time it kept, and the instant before and after.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from duetime.model import JSON, iso


@dataclass(frozen=True, slots=True)
class TimerMove:
    """One move of a pending local-form timer by new zone rules."""

    timer_id: int
    moved_at: datetime
    reason: str
    """What moved it, e.g. ``tz data 2025a -> 2025b``."""
    local: datetime
    timezone: str
    from_at: datetime
    to_at: datetime

    def to_dict(self) -> dict[str, JSON]:
        return {
            "moved_at": iso(self.moved_at),
            "reason": self.reason,
            "local": self.local.isoformat(),
            "timezone": self.timezone,
            "from_at": iso(self.from_at),
            "to_at": iso(self.to_at),
        }
