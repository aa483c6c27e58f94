"""What a put of timers with run windows does after the write: the even spread of the groups
it touched, computed in the database (``store.spreads``), and the warning when a window cannot
hold its timers at their type's rate limit.

Before the write, the timers of each even group a put holds are placed evenly among themselves
(:func:`placed_evenly`, the same arithmetic): a group written in one put is then in place when
it is written, and the pass in the database that follows moves none of them — no row written
twice, no dead row left in the pending index for the claims to step over. When the spread is
computed: once a put (``schedule``, ``schedule_many``, a schedule's
materialisation or backfill) has committed, over every pending, never-claimed timer of each
group it wrote to, so a timer added later to a group already spread spreads the group again
(all its unclaimed timers, by key, over the whole window). Inside a caller's own transaction
(the outbox) nothing is spread: those timers keep their hashed instants, within the window.
"""

from __future__ import annotations

from dataclasses import replace
from typing import cast

from duetime.app.context import AppContext
from duetime.app.window_warnings import warn, window_warnings
from duetime.model import NewTimer, PutResult
from duetime.model.fast_records import make_put_result
from duetime.store.run_windows import SpreadGroup
from duetime.timemath.run_window import even_offset


def placed_evenly(timers: list[NewTimer]) -> list[NewTimer]:
    """``timers`` with each even group's members given their place among the group's members
    in this put (ranked by key); the others as they are. Only a timer with its key is placed
    (the store draws the others' keys later: those wait at their hashed instants)."""
    groups: dict[SpreadGroup, list[int]] = {}
    for index, t in enumerate(timers):
        if t.spread == "even" and t.window is not None and t.key is not None:
            group = SpreadGroup(t.namespace, t.type, t.due_at, t.window)
            groups.setdefault(group, []).append(index)
    placed = list(timers)
    for group, members in groups.items():
        ranked = sorted(members, key=lambda i: cast(str, timers[i].key))
        for rank, index in enumerate(ranked):
            at = group.due_at + even_offset(rank, len(ranked), group.window)
            placed[index] = replace(timers[index], run_at=at)
    return placed


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
