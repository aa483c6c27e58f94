"""Writing timers on a SQLite connection: the store's own, or a caller's (the outbox).

Each function runs inside the transaction open on the connection it is given, so the store's
group commit and a caller's own transaction share one way of writing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from duetime.errors import AlreadyExists
from duetime.model import NewTimer, OnConflict, PutAction, PutResult, Timer
from duetime.store.codec import payload_text, to_micros
from duetime.store.queries import load_queries
from duetime.store.run_windows import run_instant
from duetime.store.sqlite.rows import (
    TIMER_COLUMNS,
    InstantCache,
    returning,
    timer_from_row,
    timer_from_tuple,
)
from duetime.store.transitions import Transition, refused
from duetime.support.sealing import Sealing
from duetime.validation import generate_key

Q = load_queries("duetime.store.sqlite", "writes.sql", "timers.sql")
if any(  # pragma: no cover
    returning(Q[name]) != (*TIMER_COLUMNS, "version") for name in ("insert_timer", "upsert_timer")
):
    raise RuntimeError("writes.sql: the RETURNING lists must match rows.TIMER_COLUMNS")


def timer_rows(timers: Sequence[NewTimer], now: datetime, sealing: Sealing) -> list[dict[str, Any]]:
    """The parameters :func:`write_timers` stores each timer with (a key drawn where none),
    the payload sealed where its namespace is."""
    now_us = to_micros(now)
    return [_timer_params(timer, now_us, sealing) for timer in timers]


def write_timers(
    conn: sqlite3.Connection,
    timers: Sequence[NewTimer],
    rows: Sequence[dict[str, Any]],
    on_conflict: OnConflict,
    sealing: Sealing,
) -> list[PutResult]:
    """Insert or update ``timers`` on ``conn``, in the transaction open there (the store's own,
    or a caller's: the outbox)."""
    query = Q["upsert_timer"] if on_conflict == "update" else Q["insert_timer"]
    results: list[PutResult] = []
    cursor = conn.cursor()
    cursor.row_factory = None  # TIMER_COLUMNS + version, as plain tuples
    instants = InstantCache()
    for timer, params in zip(timers, rows, strict=True):
        if timer.key is None:  # a key of the store's, drawn again should it be held
            row = _insert_generated(cursor, params)
        else:
            row = cursor.execute(query, params).fetchone()
        if row is not None:
            action: PutAction = "created" if row[-1] == 1 else "updated"
            written = timer_from_tuple(row[:-1], sealing, instants)
            if timer.window is not None:
                written = replace(written, window=timer.window, spread=timer.spread)
            results.append(PutResult(action, written))
            continue
        if on_conflict == "error":
            raise AlreadyExists(f"a timer with key {timer.key!r} already exists", field="key")
        kept = cursor.execute(Q["kept_timer"], (timer.namespace, timer.key)).fetchone()
        results.append(PutResult("kept", timer_from_tuple(kept, sealing, instants)))
    return results


def earliest_written(results: Sequence[PutResult]) -> datetime | None:
    """When the earliest timer a write created or changed is due (the wake-up to send)."""
    return min((r.timer.run_at for r in results if r.action != "kept"), default=None)


def transition(
    conn: sqlite3.Connection,
    name: Transition,
    namespace: str,
    key: str,
    now: datetime,
    sealing: Sealing,
) -> Timer:
    """Cancel or replay one timer on ``conn``; NotFound / Conflict name the key."""
    params = {"namespace": namespace, "key": key, "now": to_micros(now)}
    cursor = conn.cursor()
    cursor.row_factory = sqlite3.Row  # whatever rows the connection makes (a caller's)
    row = cursor.execute(Q[name], params).fetchone()
    if row is not None:
        return timer_from_row(row, sealing)
    existing = cursor.execute(Q["get_timer"], (namespace, key)).fetchone()
    raise refused(name, key, None if existing is None else existing["status"])


KEY_DRAWS = 3
"""Keys drawn for a timer before a clash is reported. 80 random bits a millisecond do not
repeat; a generator that did would be a fault to report, not to hide."""


def _insert_generated(cursor: sqlite3.Cursor, params: dict[str, Any]) -> tuple[Any, ...]:
    """Insert a timer under the key the store generated for it, or under another one drawn
    while a stored timer holds it (never merged with that timer)."""
    for _ in range(KEY_DRAWS):
        row: tuple[Any, ...] | None = cursor.execute(Q["insert_timer"], params).fetchone()
        if row is not None:
            return row
        params["key"] = generate_key()
    raise AlreadyExists(
        f"keys generated for a timer were held by stored timers in {KEY_DRAWS} draws",
        field="key",
    )


def _timer_params(timer: NewTimer, now_us: int, sealing: Sealing) -> dict[str, Any]:
    key = generate_key() if timer.key is None else timer.key
    window = timer.window
    return {
        "namespace": timer.namespace,
        "key": key,
        "type": timer.type,
        "payload": sealing.seal_payload(timer.namespace, payload_text(timer)),
        "subject": timer.subject,
        "correlation_id": timer.correlation_id,
        "due_at": to_micros(timer.due_at),
        "local": timer.local.isoformat() if timer.local else None,
        "timezone": timer.timezone,
        "disambiguation": timer.disambiguation,
        "expires_after": (
            None
            if timer.expires_after is None
            else int(timer.expires_after.total_seconds() * 1_000_000)
        ),
        "max_attempts": timer.max_attempts,
        "producer": timer.producer,
        "trace_context": timer.trace_context,
        "priority": timer.priority,
        "run_at": to_micros(timer.due_at if window is None else run_instant(timer, key)),
        "run_window": None if window is None else window // _MICROSECOND,
        "spread": timer.spread,
        "now": now_us,
    }


_MICROSECOND = timedelta(microseconds=1)
