"""The operator's acting part of the facade: cancel, delete, replay, run now or edit a timer,
act on every timer a filter takes, and run a schedule's next occurrence now.

:class:`ActingMethods` is mixed into :class:`duetime.app.facade.AsyncApp`. An edit is a re-schedule
of the same key with ``on_conflict="update"`` (the timer's other fields carried over), so it obeys
exactly the rules a client's re-schedule does. Running a schedule's next occurrence now creates that
occurrence's timer (its usual key) and advances the schedule past it in one transaction, then makes
the timer due: the occurrence runs once, and the schedule goes on from the one after."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from duetime.app.audit import AuditMethods
from duetime.app.outbox import held_async
from duetime.clock import Clock
from duetime.errors import CommitOutcomeUnknown, Conflict, InvalidInput, StoreUnavailable
from duetime.model import BulkAction, OnConflict, PutResult, Schedule, Timer, TimerFilter
from duetime.model.audit import Actor, filter_target
from duetime.requests import EDIT_BODY, TimerRequest
from duetime.store import Store
from duetime.store.parts import OutboxStore
from duetime.support.sealing import SealKeyMissing, Unopened
from duetime.timer_filters import check_action
from duetime.validation import check_keys, check_limit, check_lookup_key

if TYPE_CHECKING:
    from duetime.config import Settings

BULK_BATCH = 1000
"""Rows a bulk action changes per transaction."""


class ActingMethods(AuditMethods):
    """Cancel, delete, replay, run now, edit; bulk actions; run a schedule's next now."""

    store: Store
    clock: Clock
    namespace: str
    settings: Settings

    if TYPE_CHECKING:

        async def open(self, *, create_namespace: bool | None = None) -> object: ...

        async def get(self, key: str) -> Timer: ...

        def _outbox(self, doing: str) -> OutboxStore: ...

        async def get_schedule(self, name: str) -> Schedule: ...

        async def schedule_many(
            self,
            requests: Iterable[TimerRequest],
            *,
            on_conflict: OnConflict = "update",
            transaction: object | None = None,
        ) -> list[PutResult]: ...

    async def cancel(
        self, key: str, *, transaction: object | None = None, actor: Actor | None = None
    ) -> Timer:
        """Cancel while scheduled or waiting for a retry; Conflict once it has fired.

        ``transaction``: the caller's own transaction, as for :meth:`schedule` — the timer is
        cancelled only if that transaction commits, and stays as it was if it rolls back (the
        application's own work: not written to the audit log). ``actor``: who cancels it, for
        the audit log (see :mod:`duetime.app.audit`).
        """
        key = check_lookup_key(key)
        await self.open()
        if transaction is not None:
            outbox = self._outbox("cancelling inside your own transaction")
            held = await held_async(transaction)
            return await outbox.cancel_in(held.connection, self.namespace, key, self.clock.now())
        timer = await self.store.cancel(self.namespace, key, self.clock.now())
        await self._audit(actor, "cancel", {"key": key})
        return timer

    async def delete(self, key: str, *, actor: Actor | None = None) -> Timer:
        """Delete a finished timer (done, dead, cancelled or expired) with its attempts and,
        on PostgreSQL, its archived history; returns it as it was. Conflict for a pending one
        (cancel it first) or a running one; its key is free to schedule again afterwards."""
        key = check_lookup_key(key)
        await self.open()
        timer = await self.store.delete(self.namespace, key, self.clock.now())
        await self._audit(actor, "delete", {"key": key})
        return timer

    async def replay(self, key: str, *, actor: Actor | None = None) -> Timer:
        """Send a dead timer round again, due now, with a fresh set of attempts."""
        await self.open()
        key = check_lookup_key(key)
        timer = await self.store.replay(self.namespace, key, self.clock.now())
        await self._audit(actor, "replay", {"key": key})
        return timer

    async def run_now(self, key: str, *, actor: Actor | None = None) -> Timer:
        """Make a scheduled or retrying timer due now (retry now, or run early)."""
        timer = await self._made_due(key)
        await self._audit(actor, "run_now", {"key": timer.key})
        return timer

    async def _made_due(self, key: str) -> Timer:
        await self.open()
        key = check_lookup_key(key)
        return await self.store.run_now(self.namespace, key, self.clock.now())

    async def rotate_keys(
        self,
        *,
        after: int = 0,
        batch: int = 500,
        progress: Callable[[int, int], None] | None = None,
    ) -> int:
        """Seal every stored payload (timers, deliveries, schedules, PostgreSQL's archive), last
        error, attempt error and traceback with the first key of ``DUETIME_SEAL_KEYS`` — plain
        ones too, payloads in the namespaces that seal — ``batch`` rows a transaction; returns
        how many values changed. Safe beside running workers (each value is written only over
        the one read, so what a worker wrote meanwhile stays) and resumable: timers are walked
        by id from ``after``, and ``progress(changed, last id)`` after each of their batches
        says where to start again (schedules and the archive are walked again whole: the rows
        done need no change)."""
        await self.open()
        if not self.store.sealing.enabled:
            raise InvalidInput("seal_keys", "is empty: there is no key to seal with")
        check_limit(batch, "batch", maximum=10_000)
        changed = await _walk(lambda at: self.store.schedules.reseal(at, batch))
        while True:
            step, last = await self.store.reseal(after, batch)
            if last is None:
                break
            changed, after = changed + step, last
            if progress is not None:
                progress(changed, after)
        names: list[str] = []
        while page := await self.store.list_namespaces(names[-1] if names else "", 1000):
            names.extend(page)
        for name in names:
            changed += await _walk(partial(self.store.history.reseal, name, limit=batch))
        return changed

    async def bulk(
        self,
        action: BulkAction | str,
        filter: TimerFilter,
        *,
        keys: Sequence[str] | None = None,
        batch: int = BULK_BATCH,
        dry_run: bool = False,
        actor: Actor | None = None,
    ) -> int:
        """Cancel, replay, run now or delete every timer ``filter`` takes (see
        :func:`timer_filter`) — of ``keys`` only, when given (a selection, up to
        :data:`~duetime.model.MAX_BULK_KEYS`) — that the action applies to; returns how many
        changed (with ``dry_run``, how many match). Runs in batches of ``batch`` rows, each its
        own transaction, walking ids upwards: a timer that dies again meanwhile is not replayed
        twice in one run. The audit log gets one entry, with the count, once the last batch is
        done (or once one fails: with the count reached, marked ``interrupted``); a run that
        changed nothing writes none, so a request repeated in a loop cannot grow the log."""
        await self.open()
        if filter.payload is not None:
            self.store.sealing.refuse(self.namespace, "payload")
        checked = check_action(action)
        chosen = None if keys is None else check_keys(keys)
        if dry_run:
            return await self.store.count_matching(
                self.namespace, checked, filter, self.clock.now(), chosen
            )
        check_limit(batch, "batch", maximum=10_000)
        changed, after, finished = 0, 0, False
        try:
            while True:
                now = self.clock.now()
                try:
                    step, last = await self.store.bulk_batch(
                        self.namespace, checked, filter, after, now, batch, chosen
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
                await self._audit(actor, f"bulk_{checked}", target, changed)

    async def edit(
        self, key: str, changes: Mapping[str, Any], *, actor: Actor | None = None
    ) -> Timer:
        """Change a scheduled or retrying timer's due time (``at``, ``delay``, ``local`` or
        ``date``, with ``timezone``) and/or ``payload``; Conflict once it has fired.

        The rest of the timer is carried over, and the request goes through the re-schedule
        path (``on_conflict="update"``): validated as any schedule call, and a timer that
        fired meanwhile is kept as it is (Conflict). The audit log says which fields changed
        (not their values: a payload may be large)."""
        EDIT_BODY.read(dict(changes))
        if not changes:
            raise InvalidInput("body", "name a new due time (at, delay, local, date) or payload")
        timer = await self.get(key)
        if not timer.status.is_pending:
            raise Conflict(f"timer {key!r} is {timer.status.value}: only a pending one is edited")
        if timer.destination is not None:
            raise Conflict(f"timer {key!r} is a delivery of an event: edit the event instead")
        if isinstance(timer.payload, Unopened):  # never write the stand-in back over the value
            if changes.get("payload") == timer.payload:  # a form sent back as it was shown
                changes = {name: value for name, value in changes.items() if name != "payload"}
            if "payload" not in changes:
                raise SealKeyMissing(timer.payload.key_id)
        request = TimerRequest.from_dict({**_carried(timer, changes), **changes})
        (result,) = await self.schedule_many([request], on_conflict="update")
        if result.action == "kept" and not result.timer.status.is_pending:
            raise Conflict(f"timer {key!r} fired meanwhile ({result.timer.status.value})")
        if result.action != "kept":
            await self._audit(actor, "edit", {"key": key, "fields": sorted(changes)})
        return result.timer

    async def run_next_now(self, name: str, *, actor: Actor | None = None) -> Timer:
        """Run the schedule's next occurrence now: its timer (key ``schedule:<name>:<instant>``)
        is created and the schedule advanced past it in one transaction, then made due; when
        its instant comes, nothing more fires. Conflict when paused or ended."""
        from duetime.services.materializer import plan_advance

        for _ in range(5):
            schedule = await self.get_schedule(name)
            upcoming = schedule.next_at
            if not schedule.active:
                raise Conflict(f"schedule {name!r} is paused: resume it first", field="name")
            if upcoming is None:
                raise Conflict(f"schedule {name!r} has no next occurrence (ended)", field="name")
            advance = plan_advance(schedule, upcoming, lookahead=timedelta(0), per_schedule=1)
            if not advance.timers:  # pragma: no cover - next_at is always planned at itself
                raise Conflict(f"schedule {name!r} has nothing to run", field="name")
            moved = await self.store.schedules.advance_schedules([advance], self.clock.now())
            if moved:
                timer = await self._made_due(advance.timers[0].key)
                target = {"schedule": name, "key": timer.key}
                await self._audit(actor, "schedule_run_next", target)
                return timer
        raise Conflict(f"schedule {name!r} kept changing; try again", field="name")


async def _walk(step: Callable[[int], Awaitable[tuple[int, int | None]]]) -> int:
    """Run a re-sealing ``step`` from id 0 until it reads no more rows; the values changed."""
    changed, at = 0, 0
    while True:
        count, last = await step(at)
        if last is None:
            return changed
        changed, at = changed + count, last


def _carried(timer: Timer, changes: Mapping[str, Any]) -> dict[str, Any]:
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
