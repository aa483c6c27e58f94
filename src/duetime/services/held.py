"""Local times stored from SQL, resolved by duetime's own tz rules before they can fire.

The SQL functions store a local wall time with its zone and a held ``run_at``
(:data:`duetime.model.HELD_AT`): PostgreSQL's zone tables may differ from the tz data duetime
resolves with, so the instant is left to duetime. The materialiser calls :func:`release_held`
every round (a wake-up from such a write starts one at once): each held timer gets the instant
the Python API would have given it, or, when its zone, wall time or disambiguation fails
duetime's checks, ends dead with the reason — never lost, and never early.
"""

from __future__ import annotations

from datetime import datetime

from duetime.errors import InvalidInput
from duetime.model import Timer
from duetime.store.parts import ScheduleStore
from duetime.timemath.bounds import check_instant
from duetime.timemath.tzmath import load_zone, parse_disambiguation, to_utc

PAGE = 500


async def release_held(store: ScheduleStore, now: datetime, page: int = PAGE) -> int:
    """Resolve every held local-form timer (each an instant, or dead with its reason); how
    many changed."""
    changed = 0
    while True:
        held = await store.held_local_timers(page)
        if not held:
            return changed
        resolved: list[tuple[int, datetime]] = []
        failed: list[tuple[int, str]] = []
        for timer in held:
            try:
                resolved.append((timer.id, resolve(timer)))
            except InvalidInput as exc:
                failed.append((timer.id, str(exc)))
        done = await store.release_local_timers(resolved, failed, now)
        changed += done
        if len(held) < page or done == 0:
            return changed


def resolve(timer: Timer) -> datetime:
    """The instant of a held timer's wall time, by the rules ``schedule(local=…)`` follows
    (InvalidInput naming the field otherwise)."""
    if timer.local is None or timer.timezone is None:
        raise InvalidInput("local", "a held timer has no wall time and zone")
    zone = load_zone(timer.timezone)
    choice = parse_disambiguation(timer.disambiguation)
    return check_instant(to_utc(timer.local, zone, choice, "local"), "local")
