"""SQLite rows → model records."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta

from duetime.model import Attempt, Node, Outcome, Status, Timer
from duetime.store.codec import from_micros, load_json, maybe_from_micros


def timer_from_row(row: sqlite3.Row) -> Timer:
    expires = row["expires_after"]
    return Timer(
        id=row["id"],
        namespace=row["namespace"],
        key=row["key"],
        type=row["type"],
        payload=load_json(row["payload"]),
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
        last_error=row["last_error"],
        lease_owner=row["lease_owner"],
        lease_expires_at=maybe_from_micros(row["lease_expires_at"]),
    )


def attempt_from_row(row: sqlite3.Row) -> Attempt:
    return Attempt(
        timer_id=row["timer_id"],
        number=row["number"],
        node_id=row["node_id"],
        started_at=from_micros(row["started_at"]),
        finished_at=maybe_from_micros(row["finished_at"]),
        outcome=None if row["outcome"] is None else Outcome(row["outcome"]),
        error=row["error"],
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
    )
