"""PostgreSQL rows ↔ model records: psycopg already speaks datetime, timedelta and JSON."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from psycopg.cursor_async import AsyncCursor
from psycopg.types.json import Jsonb

from duetime.model import (
    Attempt,
    Node,
    Outcome,
    Status,
    Subscription,
    Timer,
)
from duetime.support.sealing import Sealing

Row = dict[str, Any]
STATUSES = {status.value: status for status in Status}


def timer_from_text_row(row: Row, sealing: Sealing) -> Timer:
    """:func:`timer_from_row` of a row fetched with its payload as JSON text
    (``fetch_json_as_text``): the payload is decoded here, and opened in the same step when
    sealed (:meth:`~duetime.support.sealing.Sealing.read_payload`: a sealed payload's wrapper
    is not decoded first), or shown as sealed where this ring cannot open it."""
    text = row["payload"]
    payload = None if text is None else sealing.read_payload(text)
    return _timer(row, payload, sealing.open_text(row["last_error"]))


def timer_from_row(row: Row, sealing: Sealing | None) -> Timer:
    """A row → Timer, its sealed values opened (or shown as sealed where this ring cannot);
    None: as stored, for a caller that opens them (:func:`~duetime.store.codec.opened_results`)."""
    payload, last_error = row["payload"], row["last_error"]
    if sealing is not None:
        payload, last_error = sealing.open_payload(payload), sealing.open_text(last_error)
    return _timer(row, payload, last_error)


def _timer(row: Row, payload: Any, last_error: str | None) -> Timer:
    return Timer(
        id=row["id"],
        namespace=row["namespace"],
        key=row["key"],
        type=row["type"],
        payload=payload,
        subject=row["subject"],
        due_at=row["due_at"],
        status=Status(row["status"]),
        attempts=row["attempts"],
        max_attempts=row["max_attempts"],
        registered_at=row["registered_at"],
        updated_at=row["updated_at"],
        run_at=row["run_at"],
        correlation_id=row["correlation_id"],
        expires_after=row["expires_after"],
        local=row["local"],
        timezone=row["timezone"],
        disambiguation=row["disambiguation"],
        fired_at=row["fired_at"],
        completed_at=row["completed_at"],
        last_error=last_error,
        lease_owner=row["lease_owner"],
        lease_expires_at=row["lease_expires_at"],
        destination=row["destination"],
        producer=row["producer"],
        trace_context=row["trace_context"],
        priority=row["priority"],
    )


def attempt_from_row(row: Row, sealing: Sealing) -> Attempt:
    return Attempt(
        timer_id=row["timer_id"],
        number=row["number"],
        node_id=row["node_id"],
        started_at=row["started_at"],
        claimed_at=row["claimed_at"],
        finished_at=row["finished_at"],
        outcome=None if row["outcome"] is None else Outcome(row["outcome"]),
        error=sealing.open_text(row["error"]),
        traceback=sealing.open_text(row["traceback"]),
    )


def node_from_row(row: Row) -> Node:
    return Node(
        id=row["id"],
        host=row["host"],
        pid=row["pid"],
        role=row["role"],
        started_at=row["started_at"],
        heartbeat_at=row["heartbeat_at"],
        in_flight=row["in_flight"],
        subscriptions=tuple(Subscription.from_dict(s) for s in row["subscriptions"]),
        clock_offset=offset_from_ms(row["clock_offset_ms"]),
    )


def node_params(node: Node) -> Row:
    return {
        "id": node.id,
        "host": node.host,
        "pid": node.pid,
        "role": node.role,
        "started_at": node.started_at,
        "heartbeat_at": node.heartbeat_at,
        "in_flight": node.in_flight,
        "subscriptions": Jsonb([s.to_dict() for s in node.subscriptions]),
        "clock_offset_ms": offset_ms(node.clock_offset),
    }


def offset_ms(offset: timedelta | None) -> float | None:
    return None if offset is None else offset.total_seconds() * 1000


def offset_from_ms(milliseconds: float | None) -> timedelta | None:
    return None if milliseconds is None else timedelta(milliseconds=milliseconds)


def column_names(cursor: AsyncCursor[Any]) -> list[str]:
    """The result's column names, read from libpq: ``cursor.description`` makes a Column
    object of each (type, size, modifier), a twentieth of a busy event loop's time."""
    result = cursor.pgresult
    if result is None:
        return []
    return [(result.fname(i) or b"").decode() for i in range(result.nfields)]
