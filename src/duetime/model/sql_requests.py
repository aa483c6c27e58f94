"""A schedule change made from SQL (``add_schedule(...)`` and the rest), stored in the caller's
transaction for a worker to check with duetime's own rules once the caller has committed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

ScheduleChangeAction = Literal["define", "pause", "resume", "remove"]


@dataclass(frozen=True, slots=True)
class ScheduleChange:
    id: int
    namespace: str
    name: str
    action: ScheduleChangeAction
    request: dict[str, Any] | None
    """``define``: the fields of ``add_schedule`` as a JSON object (``ScheduleRequest``'s)."""
    on_conflict: str
    requested_by: str
    """``sql:<role>``: the database role that asked, for the audit log."""
    schedule_version: int | None = None
    """The version of the schedule row the SQL function wrote, which a worker checks and plans
    (None: a request of the first schema's functions, which a worker applies itself)."""
    outcome: str | None = None
    """What the SQL function answered (``created``, ``updated``, ``paused``, ``resumed``)."""
