"""What the timers part's operator actions share: the fields an edit may change and carries
over, and a bulk action's run in batches.

A bulk action runs in batches of rows, each its own transaction, walking ids upwards, and is
written to the audit log once, with the count it reached (see :meth:`Timers.bulk
<duetime.app.timers.Timers.bulk>`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from duetime.app.audit import Audit
from duetime.app.context import AppContext
from duetime.errors import CommitOutcomeUnknown, StoreUnavailable
from duetime.model import BulkAction, Timer, TimerFilter
from duetime.model.audit import Actor, filter_target
from duetime.timer_filters import check_action
from duetime.validation import check_keys, check_limit

BULK_BATCH = 1000
"""Rows a bulk action changes per transaction."""


async def run_bulk(
    context: AppContext,
    audit: Audit,
    action: BulkAction | str,
    filter: TimerFilter,
    keys: Sequence[str] | None,
    batch: int,
    dry_run: bool,
    actor: Actor | None,
) -> int:
    """:meth:`Timers.bulk <duetime.app.timers.Timers.bulk>` on an open store."""
    store, namespace = context.store, context.namespace
    checked = check_action(action)
    chosen = None if keys is None else check_keys(keys)
    if dry_run:
        return await store.count_matching(namespace, checked, filter, context.clock.now(), chosen)
    check_limit(batch, "batch", maximum=10_000)
    changed, after, finished = 0, 0, False
    try:
        while True:
            now = context.clock.now()
            try:
                step, last = await store.bulk_batch(
                    namespace, checked, filter, after, now, batch, chosen
                )
            except StoreUnavailable as exc:
                raise partly_done(exc, checked, changed) from exc
            changed += step
            if last is None:
                finished = True
                return changed
            after = last
    finally:
        target = filter_target(filter, chosen)
        if not finished:
            target["interrupted"] = True
        if changed:
            await audit.note(actor, f"bulk_{checked}", target, changed)


def carried(timer: Timer, changes: Mapping[str, Any]) -> dict[str, Any]:
    """The timer as a schedule request: every field it has, its due time unless changed."""
    carried: dict[str, Any] = {
        "type": timer.type,
        "key": timer.key,
        "payload": timer.payload,
        "subject": timer.subject,
        "correlation_id": timer.correlation_id,
        "max_attempts": timer.max_attempts,
        "priority": timer.priority,
    }
    if timer.expires_after is not None:
        carried["expires_after"] = timer.expires_after.total_seconds()
    if not any(name in changes for name in ("at", "delay", "local", "date")):
        if timer.local is not None:
            carried["local"] = timer.local.replace(tzinfo=None).isoformat()
            carried["timezone"] = timer.timezone
            carried["disambiguation"] = timer.disambiguation
        else:
            carried["at"] = timer.due_at.isoformat()
    return carried


def partly_done(exc: StoreUnavailable, action: str, changed: int) -> StoreUnavailable:
    """The error of a bulk action whose batch ``exc`` ended it: as it is when no earlier batch
    changed anything, else one that says how many did (each batch commits on its own), never
    that nothing was written."""
    if not changed:
        return exc
    return CommitOutcomeUnknown(
        exc,
        message=f"the store went away during a bulk {action} ({exc.message}) after "
        f"{changed} timers were changed by its earlier batches; the rest may not have been. "
        "Running the same action again applies it to those left",
    )
