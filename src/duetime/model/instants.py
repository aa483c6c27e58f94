"""How duetime prints an instant: one format everywhere, so that every answer, log line and
stored text compares and sorts alike."""

from __future__ import annotations

from datetime import datetime


def iso(instant: datetime | None) -> str | None:
    """ISO 8601 in UTC with a 'Z', the one format duetime prints instants in."""
    if instant is None:
        return None
    return instant.isoformat().replace("+00:00", "Z")
