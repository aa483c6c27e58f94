"""The timers part of an app (``app.timers``): schedule, read and act on the namespace's timers.

Scheduling goes through :class:`~duetime.app.scheduling.TimerWrites`; the operator's actions
(cancel, delete, replay, run now, edit, bulk) are audited through the app's
:class:`~duetime.app.audit.Audit`. An edit is a re-schedule of the same key with
``on_conflict="update"`` (the timer's other fields carried over), so it obeys exactly the rules a
client's re-schedule does. Every listing checks its page size and filter before it touches the
store.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import date as date_type
from datetime import datetime, timedelta
from typing import Any

from duetime.app.acting import BULK_BATCH, carried, run_bulk
from duetime.app.audit import Audit
from duetime.app.context import AppContext
from duetime.app.outbox import held_async
from duetime.app.scheduling import TimerWrites
from duetime.errors import Conflict, InvalidInput, NotFound
from duetime.model import (
    JSON,
    Attempt,
    BulkAction,
    DeadType,
    NewTimer,
    OnConflict,
    Page,
    PutResult,
    Status,
    Timer,
    TimerFilter,
)
from duetime.model.audit import Actor
from duetime.model.finding import PayloadMatch
from duetime.model.moves import TimerMove
from duetime.requests import EDIT_BODY, TimerRequest
from duetime.support.sealing import SealKeyMissing, Unopened
from duetime.timer_filters import check_sort, timer_filter
from duetime.validation import check_limit, check_lookup_key


class Timers:
    """The namespace's timers: schedule them (one or many), read them, act on them."""

    def __init__(self, context: AppContext, audit: Audit) -> None:
        self._context = context
        self._audit = audit
        self._writes = TimerWrites(context)

    async def schedule(
        self,
        type: str,
        payload: JSON = None,
        *,
        at: str | datetime | None = None,
        delay: str | int | float | timedelta | None = None,
        local: str | datetime | None = None,
        date: str | date_type | None = None,
        timezone: str | None = None,
        disambiguation: str = "compatible",
        key: str | None = None,
        subject: str | None = None,
        correlation_id: str | None = None,
        max_attempts: int | None = None,
        expires_after: str | float | timedelta | None = None,
        priority: int | None = None,
        on_conflict: OnConflict = "update",
        transaction: object | None = None,
    ) -> PutResult:
        """Store one timer; the answer says whether it was created, updated or kept.

        ``transaction``: the caller's own transaction, to store the timer in (the outbox
        pattern): it is visible only once that transaction commits, and gone if it rolls back.
        AsyncApp takes a psycopg ``AsyncConnection``, a SQLAlchemy ``AsyncConnection`` or
        ``AsyncSession`` (psycopg driver), or a ``sqlite3.Connection`` on this app's SQLite
        file; :class:`duetime.App` the blocking kinds — a psycopg ``Connection``, a SQLAlchemy
        ``Connection`` or ``Session``, Django's ``connection`` inside ``transaction.atomic()``,
        a ``sqlite3.Connection``. One that has not begun its transaction yet is made to begin
        it; one in autocommit mode with none open is refused. See docs/transactions.md.
        """
        request = TimerRequest(
            type=type,
            payload=payload,
            at=at,
            delay=delay,
            local=local,
            date=date,
            timezone=timezone,
            disambiguation=disambiguation,
            key=key,
            subject=subject,
            correlation_id=correlation_id,
            max_attempts=max_attempts,
            expires_after=expires_after,
            priority=priority,
        )
        (result,) = await self._writes.schedule_many([request], on_conflict, transaction)
        return result

    async def schedule_many(
        self,
        requests: Iterable[TimerRequest],
        *,
        on_conflict: OnConflict = "update",
        transaction: object | None = None,
    ) -> list[PutResult]:
        """Store many timers in one transaction: all of them, or (on bad input) none.

        ``transaction``: the caller's own transaction, as for :meth:`schedule`. With tracing
        on, in one ``duetime schedule`` span, whose context each timer stores."""
        return await self._writes.schedule_many(requests, on_conflict, transaction)

    def prepare(self, requests: Iterable[TimerRequest]) -> list[NewTimer]:
        """Validate requests into storable timers (raises InvalidInput naming the field)."""
        return list(self._writes.resolve(requests))

    async def put(
        self,
        timers: Iterable[NewTimer],
        *,
        on_conflict: OnConflict = "update",
        transaction: object | None = None,
    ) -> list[PutResult]:
        """Store validated timers (see :meth:`prepare`); ``transaction`` as for :meth:`schedule`."""
        return await self._writes.put(timers, on_conflict, transaction)

    # -- reading ------------------------------------------------------------------------------
    async def get(self, key: str) -> Timer:
        context = self._context
        await context.open()
        timer = await context.store.get_timer(context.namespace, check_lookup_key(key))
        if timer is None:
            where = f"no timer with key {key!r} in namespace {context.namespace!r}"
            raise NotFound(where, field="key")
        return timer

    async def attempts(self, key: str) -> list[Attempt]:
        timer = await self.get(key)
        return await self._context.store.list_attempts(timer.id)

    async def moves(self, key: str) -> list[TimerMove]:
        """The timer's moves by new zone rules (its wall time kept), oldest first."""
        timer = await self.get(key)
        return await self._context.store.schedules.list_timer_moves(timer.id)

    async def history(
        self,
        subject: str | None = None,
        *,
        status: Status | str | None = None,
        type: str | None = None,
        due_from: str | datetime | timedelta | None = None,
        due_until: str | datetime | timedelta | None = None,
        payload: str | PayloadMatch | None = None,
        sort: str | None = None,
        cursor: str | None = None,
        limit: int = 50,
        schedule: str | None = None,
    ) -> Page[Timer]:
        """Timers newest first, optionally of one subject / status / type (or ``order.*``
        glob) / due range ``[due_from, due_until)`` / payload field (``customer.id=42``);
        ``sort``: ``due`` (earliest first), ``updated`` (latest first), ``attempts`` (most
        first) instead; ``schedule``: only that schedule's occurrences; paginated by cursor."""
        context = self._context
        await context.open()
        found = timer_filter(
            subject=subject,
            status=status,
            type=type,
            due_from=due_from,
            due_until=due_until,
            payload=payload,
            schedule=schedule,
            now=context.clock.now(),
        )
        if found.payload is not None:
            context.store.sealing.refuse(context.namespace, "payload")
        order = check_sort(sort or "newest")
        check_limit(limit)
        return await context.store.list_timers(context.namespace, found, cursor, limit, order)

    async def dead(self, *, cursor: str | None = None, limit: int = 50) -> Page[Timer]:
        """The dead-letter queue: timers that ran out of attempts or were declared dead."""
        return await self.history(status=Status.DEAD, cursor=cursor, limit=limit)

    async def dead_types(self, limit: int = 20) -> list[DeadType]:
        """The dead-letter queue by event type, most first: what broke, and how much of it."""
        await self._context.open()
        check_limit(limit)
        return await self._context.store.dead_types(self._context.namespace, limit)

    async def counts(self) -> dict[Status, int]:
        """Timers by status in the hot table (on PostgreSQL, archived ones are not counted)."""
        await self._context.open()
        return await self._context.store.count_by_status(self._context.namespace)

    # -- acting -------------------------------------------------------------------------------
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
        context = self._context
        await context.open()
        if transaction is not None:
            outbox = context.outbox("cancelling inside your own transaction")
            held = await held_async(transaction)
            now = context.clock.now()
            return await outbox.cancel_in(held.connection, context.namespace, key, now)
        timer = await context.store.cancel(context.namespace, key, context.clock.now())
        await self._audit.note(actor, "cancel", {"key": key})
        return timer

    async def delete(self, key: str, *, actor: Actor | None = None) -> Timer:
        """Delete a finished timer (done, dead, cancelled or expired) with its attempts and,
        on PostgreSQL, its archived history; returns it as it was. Conflict for a pending one
        (cancel it first) or a running one; its key is free to schedule again afterwards."""
        key = check_lookup_key(key)
        context = self._context
        await context.open()
        timer = await context.store.delete(context.namespace, key, context.clock.now())
        await self._audit.note(actor, "delete", {"key": key})
        return timer

    async def replay(self, key: str, *, actor: Actor | None = None) -> Timer:
        """Send a dead timer round again, due now, with a fresh set of attempts."""
        context = self._context
        await context.open()
        key = check_lookup_key(key)
        timer = await context.store.replay(context.namespace, key, context.clock.now())
        await self._audit.note(actor, "replay", {"key": key})
        return timer

    async def run_now(self, key: str, *, actor: Actor | None = None) -> Timer:
        """Make a scheduled or retrying timer due now (retry now, or run early)."""
        context = self._context
        await context.open()
        key = check_lookup_key(key)
        timer = await context.store.run_now(context.namespace, key, context.clock.now())
        await self._audit.note(actor, "run_now", {"key": timer.key})
        return timer

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
        await self._context.open()
        if filter.payload is not None:
            self._context.store.sealing.refuse(self._context.namespace, "payload")
        return await run_bulk(
            self._context, self._audit, action, filter, keys, batch, dry_run, actor
        )

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
        request = TimerRequest.from_dict({**carried(timer, changes), **changes})
        (result,) = await self.schedule_many([request], on_conflict="update")
        if result.action == "kept" and not result.timer.status.is_pending:
            raise Conflict(f"timer {key!r} fired meanwhile ({result.timer.status.value})")
        if result.action != "kept":
            await self._audit.note(actor, "edit", {"key": key, "fields": sorted(changes)})
        return result.timer
