"""SQLite rows → model records."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from typing import Any

from duetime.model import (
    Attempt,
    Claimed,
    Node,
    Outcome,
    Status,
    Subscription,
    Timer,
    unreadable_timer,
)
from duetime.model.fast_records import make_timer
from duetime.store.codec import from_micros, load_json, maybe_from_micros
from duetime.support.sealing import Sealing


def timer_from_row(row: sqlite3.Row, sealing: Sealing) -> Timer:
    """A row → Timer, its sealed values opened (or shown as sealed where this ring cannot)."""
    expires = row["expires_after"]
    return Timer(
        id=row["id"],
        namespace=row["namespace"],
        key=row["key"],
        type=row["type"],
        payload=sealing.read_payload(row["payload"]),
        subject=row["subject"],
        due_at=from_micros(row["due_at"]),
        status=Status(row["status"]),
        attempts=row["attempts"],
        max_attempts=row["max_attempts"],
        registered_at=from_micros(row["registered_at"]),
        updated_at=from_micros(row["updated_at"]),
        run_at=from_micros(row["run_at"]),
        correlation_id=row["correlation_id"],
        expires_after=None if expires is None else timedelta(microseconds=expires),
        local=None if row["local"] is None else datetime.fromisoformat(row["local"]),
        timezone=row["timezone"],
        disambiguation=row["disambiguation"],
        fired_at=maybe_from_micros(row["fired_at"]),
        completed_at=maybe_from_micros(row["completed_at"]),
        last_error=sealing.open_text(row["last_error"]),
        lease_owner=row["lease_owner"],
        lease_expires_at=maybe_from_micros(row["lease_expires_at"]),
        destination=row["destination"],
        producer=row["producer"],
        trace_context=row["trace_context"],
        priority=row["priority"],
        window=_window(row),
        spread=row["spread"] if "spread" in row.keys() else None,  # noqa: SIM118
    )


def _window(row: sqlite3.Row) -> timedelta | None:
    micros = row["run_window"] if "run_window" in row.keys() else None  # noqa: SIM118
    return None if micros is None else timedelta(microseconds=micros)


def attempt_from_row(row: sqlite3.Row, sealing: Sealing) -> Attempt:
    return Attempt(
        timer_id=row["timer_id"],
        number=row["number"],
        node_id=row["node_id"],
        started_at=maybe_from_micros(row["started_at"]),
        finished_at=maybe_from_micros(row["finished_at"]),
        claimed_at=maybe_from_micros(row["claimed_at"]),
        outcome=None if row["outcome"] is None else Outcome(row["outcome"]),
        error=sealing.open_text(row["error"]),
        traceback=sealing.open_text(row["traceback"]),
    )


def node_from_row(row: sqlite3.Row) -> Node:
    return Node(
        id=row["id"],
        host=row["host"],
        pid=row["pid"],
        role=row["role"],
        started_at=from_micros(row["started_at"]),
        heartbeat_at=from_micros(row["heartbeat_at"]),
        in_flight=row["in_flight"],
        subscriptions=tuple(Subscription.from_dict(s) for s in load_json(row["subscriptions"])),
    )


# -- the hot path: plain tuples in a fixed column order ----------------------------------------

TIMER_COLUMNS = (
    "id",
    "namespace",
    "key",
    "type",
    "payload",
    "subject",
    "due_at",
    "status",
    "attempts",
    "max_attempts",
    "registered_at",
    "updated_at",
    "run_at",
    "correlation_id",
    "expires_after",
    "local",
    "timezone",
    "disambiguation",
    "fired_at",
    "completed_at",
    "last_error",
    "lease_owner",
    "lease_expires_at",
    "destination",
    "producer",
    "trace_context",
    "priority",
)
"""The column order of queries that return timers as plain tuples (the order of Timer's fields).

Those queries spell the list out; the store checks at import that they agree with this one."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_STATUS = {status.value: status for status in Status}


class InstantCache(dict[int, datetime]):
    """Stored instants → datetimes, shared by the rows of one batch.

    Rows claimed together mostly carry the same instants (the claim's own time and lease, and
    often one due or registration time), and a datetime is immutable: one object serves them all.
    """

    def __missing__(self, micros: int) -> datetime:
        value = self[micros] = _EPOCH + timedelta(0, 0, micros)
        return value


def timer_from_tuple(
    row: tuple[Any, ...],
    sealing: Sealing,
    instants: InstantCache | None = None,
    *,
    strict: bool = False,
) -> Timer:
    """A row of :data:`TIMER_COLUMNS` → Timer; the claim path's per-row cost, kept low. A
    sealed payload this ring cannot open raises when ``strict`` (a claim, about to run it)."""
    (
        id,
        namespace,
        key,
        type,
        payload,
        subject,
        due_at,
        status,
        attempts,
        max_attempts,
        registered_at,
        updated_at,
        run_at,
        correlation_id,
        expires_after,
        local,
        timezone,
        disambiguation,
        fired_at,
        completed_at,
        last_error,
        lease_owner,
        lease_expires_at,
        destination,
        producer,
        trace_context,
        priority,
    ) = row
    at = InstantCache() if instants is None else instants
    return make_timer(
        id,
        namespace,
        key,
        type,
        sealing.read_payload(payload, strict=strict),
        subject,
        at[due_at],
        _STATUS[status],
        attempts,
        max_attempts,
        at[registered_at],
        at[updated_at],
        at[run_at],
        correlation_id,
        None if expires_after is None else timedelta(0, 0, expires_after),
        None if local is None else datetime.fromisoformat(local),
        timezone,
        disambiguation,
        None if fired_at is None else at[fired_at],
        None if completed_at is None else at[completed_at],
        sealing.open_text(last_error),
        lease_owner,
        None if lease_expires_at is None else at[lease_expires_at],
        destination,
        producer,
        trace_context,
        priority,
    )


def claimed_from_tuple(row: tuple[Any, ...], instants: InstantCache, sealing: Sealing) -> Claimed:
    """A claimed row → Claimed; one that cannot be read becomes a Claimed that says why, so
    that it ends alone instead of failing its whole claim."""
    try:
        return Claimed(timer_from_tuple(row, sealing, instants, strict=True), row[8])
    except Exception as exc:
        timer = unreadable_timer(row[0], row[1], row[2], row[3], row[8])
        return Claimed(timer, row[8], f"{type(exc).__name__}: {exc}")


def returning(sql: str) -> tuple[str, ...]:
    """The column names of a query's RETURNING clause."""
    clause = sql.rsplit("RETURNING", 1)[1]
    return tuple(name.strip() for name in clause.split(","))
