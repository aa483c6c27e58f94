"""What the assertions match timers on, and the failure messages that show why nothing matched.

A failed assertion lists what there is, each timer marked with the fields that differ, so the
test's output alone tells whether the key, the payload or the due time is wrong.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TypedDict

from duetime.model import JSON, Status, Timer
from duetime.testing.pinning import instant, iso

PENDING = "pending"
"""``status=PENDING`` (the default) matches timers that will still fire: scheduled or retrying."""
ANY_STATUS = None
"""``status=ANY_STATUS`` matches timers in every status, finished ones included."""

_SHOWN = 50
"""Timers listed in one failure message; the rest are counted."""


class Match(TypedDict, total=False):
    """What ``scheduled`` / ``assert_scheduled`` / ``assert_not_scheduled`` can match on.

    ``payload`` matches a subset (recursively into dicts); ``due_at`` is an aware instant or ISO
    8601 text with an offset; ``status`` is ``"pending"`` (the default: scheduled or retrying),
    a status, several, or ``None`` for any.
    """

    key: str | None
    subject: str | None
    payload: JSON
    due_at: datetime | str | None
    status: Status | str | Iterable[Status | str] | None


@dataclass(frozen=True, slots=True)
class Criteria:
    """What an assertion looks for; ``None`` fields match anything."""

    type: str | None = None
    key: str | None = None
    subject: str | None = None
    payload: JSON = None
    due_at: datetime | None = None
    status: frozenset[Status] | None = None

    def differences(self, timer: Timer) -> list[str]:
        """The names of the fields on which ``timer`` does not match."""
        wrong = []
        if self.type is not None and timer.type != self.type:
            wrong.append("type")
        if self.key is not None and timer.key != self.key:
            wrong.append("key")
        if self.subject is not None and timer.subject != self.subject:
            wrong.append("subject")
        if self.payload is not None and not _contains(timer.payload, self.payload):
            wrong.append("payload")
        if self.due_at is not None and timer.due_at != self.due_at:
            wrong.append("due_at")
        if self.status is not None and timer.status not in self.status:
            wrong.append("status")
        return wrong

    def matches(self, timer: Timer) -> bool:
        return not self.differences(timer)

    def describe(self) -> str:
        parts = [
            f"{name}={value!r}"
            for name, value in (
                ("type", self.type),
                ("key", self.key),
                ("subject", self.subject),
                ("payload", self.payload),
            )
            if value is not None
        ]
        if self.due_at is not None:
            parts.append(f"due_at={iso(self.due_at)}")
        if self.status is not None:
            parts.append("status=" + "|".join(sorted(s.value for s in self.status)))
        return ", ".join(parts) or "anything"


def criteria(type: str | None, match: Match) -> Criteria:
    """The criteria of an assertion's arguments; an unknown field is a TypeError, not ignored."""
    unknown = set(match) - set(Match.__annotations__)
    if unknown:
        raise TypeError(f"unknown field to match on: {', '.join(sorted(unknown))}")
    due_at = match.get("due_at")
    return Criteria(
        type=type,
        key=match.get("key"),
        subject=match.get("subject"),
        payload=match.get("payload"),
        due_at=None if due_at is None else instant(due_at, "due_at"),
        status=_statuses(match.get("status", PENDING)),
    )


def _statuses(status: Status | str | Iterable[Status | str] | None) -> frozenset[Status] | None:
    if status is None:
        return None
    if status == PENDING:
        return frozenset({Status.SCHEDULED, Status.RETRYING})
    names = [status] if isinstance(status, str) else list(status)
    try:
        return frozenset(Status(name) for name in names)
    except ValueError:
        known = ", ".join([PENDING, *(s.value for s in Status)])
        raise ValueError(f"status must be one of {known} or None, not {status!r}") from None


def _contains(actual: JSON, expected: JSON) -> bool:
    """Subset match: every key of an expected dict must be in ``actual`` and match, recursively."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return False
        return all(
            name in actual and _contains(actual[name], value) for name, value in expected.items()
        )
    return bool(actual == expected)


def by_due(timers: Iterable[Timer]) -> list[Timer]:
    """Earliest due first (ties by id), the order assertions report timers in."""
    return sorted(timers, key=lambda t: (t.due_at, t.id))


def _line(timer: Timer, wanted: Criteria | None = None) -> str:
    text = (
        f"  - {timer.type} key={timer.key!r} status={timer.status.value} due_at={iso(timer.due_at)}"
    )
    if timer.local is not None and timer.timezone is not None:
        text += f" ({timer.local.isoformat()} {timer.timezone})"
    if timer.subject is not None:
        text += f" subject={timer.subject!r}"
    text += f" payload={timer.payload!r}"
    if wanted is not None:
        wrong = wanted.differences(timer)
        if wrong:
            text += f"  <- differs in {', '.join(wrong)}"
    return text


def listing(timers: Sequence[Timer], wanted: Criteria | None = None) -> str:
    """One line per timer (at most :data:`_SHOWN`), marked with what differs from ``wanted``."""
    if not timers:
        return "  (none)"
    ordered = by_due(timers)
    lines = [_line(timer, wanted) for timer in ordered[:_SHOWN]]
    if len(ordered) > _SHOWN:
        lines.append(f"  ... and {len(ordered) - _SHOWN} more")
    return "\n".join(lines)


def not_found_message(wanted: Criteria, namespace: str, everything: Sequence[Timer]) -> str:
    return (
        f"no timer matched {wanted.describe()}\n"
        f"timers in namespace {namespace!r} ({len(everything)}):\n"
        f"{listing(everything, wanted)}"
    )


def unexpected_message(wanted: Criteria, found: Sequence[Timer]) -> str:
    return f"expected no timer matching {wanted.describe()}, found {len(found)}:\n{listing(found)}"
