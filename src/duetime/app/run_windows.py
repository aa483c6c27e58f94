"""What a put of timers with run windows does after the write: the even spread of the groups
it touched, computed in the database (``store.spreads``), and the warning when a window cannot
hold its timers at their type's rate limit.

When the spread is computed: once a put (``schedule``, ``schedule_many``, a schedule's
materialisation or backfill) has committed, over every pending, never-claimed timer of each
group it wrote to, so a timer added later to a group already spread spreads the group again
(all its unclaimed timers, by key, over the whole window). Inside a caller's own transaction
(the outbox) nothing is spread: those timers keep their hashed instants, within the window.
"""

from __future__ import annotations

from duetime.app.context import AppContext
from duetime.app.window_warnings import warn, window_warnings
from duetime.model import PutResult
from duetime.model.fast_records import make_put_result
from duetime.store.run_windows import SpreadGroup

REREAD_MOST = 100
"""Up to this many evenly spread timers, the answer shows each one's spread instant (read
again); a larger batch answers their hashed ones, which the spread has since replaced."""


async def windows_placed(context: AppContext, results: list[PutResult]) -> list[PutResult]:
    """Spread the even groups ``results`` wrote to, warn of windows too short for their rate
    limit; answer ``results`` with the spread instants read again when few."""
    store = context.store
    written = [r.timer for r in results if r.action != "kept"]
    groups = list(
        dict.fromkeys(
            SpreadGroup(t.namespace, t.type, t.due_at, t.window)
            for t in written
            if t.spread == "even" and t.window is not None
        )
    )
    if groups:
        await store.spreads.spread(groups)
        results = await _read_again(context, results)
    rules = await store.limits.list_rules(context.namespace)
    if rules:
        warn(await window_warnings(written, rules, store.spreads))
    return results


async def _read_again(context: AppContext, results: list[PutResult]) -> list[PutResult]:
    spread = [i for i, r in enumerate(results) if r.timer.spread == "even"]
    if len(spread) > REREAD_MOST:
        return results
    again: list[PutResult] = list(results)
    for i in spread:
        timer = await context.store.get_timer(context.namespace, results[i].timer.key)
        if timer is not None:
            again[i] = make_put_result(results[i].action, timer)
    return again
