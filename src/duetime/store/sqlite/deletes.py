"""Deleting finished timers from the SQLite file: one timer by key, or a bulk action's batch.

A deleted timer's attempts go with it. Its id is never handed out again: SQLite numbers a new
row max(id) + 1, so the table's newest row, when it is deleted, is hollowed instead — moved out
of every namespace with nothing of the timer left — until a newer row takes its place.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime

from duetime.model import Timer
from duetime.store.codec import dump_json, to_micros
from duetime.store.queries import load_queries
from duetime.store.sqlite.rows import timer_from_row
from duetime.store.transitions import refused
from duetime.support.sealing import Sealing

Q = load_queries("duetime.store.sqlite", "timers.sql")


def delete_ids(conn: sqlite3.Connection, ids: Sequence[int], now: datetime) -> int:
    """Delete those of ``ids`` that are finished, in the transaction open on ``conn``; how many."""
    params = {"ids": dump_json(list(ids)), "now": to_micros(now)}
    hollowed = [row[0] for row in conn.execute(Q["hollow_newest"], params).fetchall()]
    for timer_id in hollowed:
        conn.execute(Q["drop_attempts_of"], {"id": timer_id})
    return len(hollowed) + conn.execute(Q["bulk_delete"], params).rowcount


def delete_key(
    conn: sqlite3.Connection, namespace: str, key: str, now: datetime, sealing: Sealing
) -> Timer:
    """Delete the finished timer ``key``; NotFound or Conflict (saying what to do) otherwise."""
    cursor = conn.cursor()
    cursor.row_factory = sqlite3.Row
    row = cursor.execute(Q["get_timer"], (namespace, key)).fetchone()
    if row is None or row["status"] not in ("done", "dead", "cancelled", "expired"):
        raise refused("delete", key, None if row is None else row["status"])
    delete_ids(conn, [row["id"]], now)
    return timer_from_row(row, sealing)
