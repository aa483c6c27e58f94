"""Marking pending rows running: the claim's statement and the attempt rows it opens, shared by
the plain claim (``claim_due``) and the claims under flow control (:mod:`.flow_control`). Each
claim writes a token of its own on its rows (:func:`~duetime.store.codec.new_claim_token`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from typing import Any

from duetime.model import Claimed
from duetime.model.fast_records import set_claim_token
from duetime.store.codec import dump_json, new_claim_token
from duetime.store.queries import load_queries
from duetime.store.sqlite.rows import InstantCache, claimed_from_tuple
from duetime.support.sealing import Sealing

Q = load_queries("duetime.store.sqlite", "claims.sql")


def take_rows(
    conn: sqlite3.Connection,
    query: str,
    params: Mapping[str, Any],
    node_id: str,
    now_us: int,
    sealing: Sealing,
) -> list[Claimed]:
    """Run a claim statement (RETURNING rows.TIMER_COLUMNS) and open an attempt per row;
    the claimed rows highest priority first, then oldest ``run_at``."""
    cursor = conn.cursor()
    cursor.row_factory = None  # plain tuples in TIMER_COLUMNS order: the hot path
    token = new_claim_token()
    rows: list[tuple[Any, ...]] = cursor.execute(query, {**params, "claim_token": token}).fetchall()
    if not rows:
        return []
    rows.sort(key=_priority_run_at_then_id)
    batch = dump_json([(row[0], row[8]) for row in rows])
    conn.execute(Q["open_attempts"], {"batch": batch, "node_id": node_id, "now": now_us})
    instants = InstantCache()
    claimed = [claimed_from_tuple(row, instants, sealing) for row in rows]
    for item in claimed:
        set_claim_token(item.timer, token)
    return claimed


def _priority_run_at_then_id(row: tuple[Any, ...]) -> tuple[int, int, int]:
    return -row[26], row[12], row[0]  # rows.TIMER_COLUMNS: priority, run_at, id
