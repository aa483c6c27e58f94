"""Fenced finishes on SQLite: the transitions an owner's outcomes make, and only while it owns them.

Each statement checks ``(timer id, attempt, owner node, claim token)``, so a node that lost its
lease cannot overwrite the attempt that replaced it, nor an outcome of a claim the database
forgot land on the claim that replaced it; shared by ``finish`` and the transactional handlers.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from duetime.model import Finish, Outcome, Status
from duetime.store.codec import dump_json, to_micros
from duetime.store.queries import load_queries

Q = load_queries("duetime.store.sqlite", "outcomes.sql")

_FINAL_OUTCOMES = {
    Outcome.DONE: None,
    Outcome.DEAD: Status.DEAD,
    Outcome.CANCELLED: Status.CANCELLED,
    Outcome.EXPIRED: Status.EXPIRED,
}


def finish_done(
    conn: sqlite3.Connection, done: Sequence[Finish], node_id: str, now_us: int
) -> list[int]:
    """Apply many DONE finishes in two statements; return the timer ids no longer ours."""
    batch = dump_json([_done_row(f) for f in done])
    params = {"batch": batch, "node_id": node_id, "now": now_us}
    changed = {row[0] for row in conn.execute(Q["finish_done_many"], params)}
    lost = [f.timer_id for f in done if f.timer_id not in changed]
    if changed:
        if lost:
            params["batch"] = dump_json([_done_row(f) for f in done if f.timer_id in changed])
        conn.execute(Q["close_attempts_done"], {"batch": params["batch"], "now": now_us})
    return lost


def _done_row(f: Finish) -> tuple[int, int, int | None, int | None]:
    """A row of finish_done_many's batch: id, attempt, claim token, start (microseconds)."""
    started = None if f.started_at is None else to_micros(f.started_at)
    return (f.timer_id, f.attempt, f.claim_token, started)


def apply_finish(conn: sqlite3.Connection, outcome: Outcome, params: dict[str, Any]) -> bool:
    """Run the fenced transition for one finish; False when the attempt is no longer ours."""
    if outcome is Outcome.DONE:
        changed = conn.execute(Q["finish_done"], params).rowcount
    elif outcome is Outcome.RETRY:
        changed = conn.execute(Q["finish_retry"], params).rowcount
    elif outcome is Outcome.SNOOZED:
        changed = conn.execute(Q["finish_snoozed"], params).rowcount
    elif outcome is Outcome.RELEASED:
        changed = conn.execute(Q["finish_released"], params).rowcount
        if changed:
            conn.execute(Q["drop_attempt"], params)
        return bool(changed)
    else:
        status = _FINAL_OUTCOMES[outcome]
        assert status is not None
        changed = conn.execute(Q["finish_final"], {**params, "status": status.value}).rowcount
    if changed:
        conn.execute(Q["close_attempt"], params)
    return bool(changed)
