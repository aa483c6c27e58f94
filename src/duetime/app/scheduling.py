"""The scheduling part of the facade: validate requests into timers and store them, or emit.

:class:`SchedulingMethods` is mixed into :class:`duetime.app.facade.AsyncApp`. Requests are
validated as the store reads them, so a large batch streams instead of being held twice; a
caller's own ``transaction`` goes through the store's outbox part.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import date as date_type
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from duetime.app.outbox import held_async
from duetime.clock import Clock
from duetime.config import Settings
from duetime.errors import InvalidInput
from duetime.model import JSON, NewTimer, OnConflict, PutResult
from duetime.requests import TimerRequest
from duetime.store import Store
from duetime.store.parts import OutboxStore, require
from duetime.validation import check_on_conflict

if TYPE_CHECKING:
    from duetime.observability.otel import Tracing

_END = object()
"""What ``next`` returns past the last request (a request list may hold anything)."""


class SchedulingMethods:
    """Schedule timers (one or many), store prepared ones, emit events now."""

    store: Store
    clock: Clock
    namespace: str
    settings: Settings
    _opened: bool

    if TYPE_CHECKING:

        async def open(self, *, create_namespace: bool | None = None) -> object: ...

        def _tracing(self) -> Tracing | None: ...

        def producer_id(self) -> str: ...

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
        (result,) = await self.schedule_many(
            [request], on_conflict=on_conflict, transaction=transaction
        )
        return result

    async def schedule_many(
        self,
        requests: Iterable[TimerRequest],
        *,
        on_conflict: OnConflict = "update",
        transaction: object | None = None,
    ) -> list[PutResult]:
        """Store many timers in one transaction: all of them, or (on bad input) none.

        ``transaction``: the caller's own transaction, as for :meth:`schedule`.

        With tracing on, in one ``duetime schedule`` span (``duetime schedule {type}`` for a
        list of one request), whose context each timer stores.
        """
        tracing = self._tracing()
        if tracing is None:
            return await self._store_requests(requests, on_conflict, transaction)
        one = requests[0].type if isinstance(requests, Sequence) and len(requests) == 1 else None
        with tracing.scheduling(self.namespace, one) as span:
            results = await self._store_requests(requests, on_conflict, transaction)
            if one is not None:
                span.set_attribute("messaging.message.id", results[0].timer.key)
                span.set_attribute("duetime.action", results[0].action)
            else:
                span.set_attribute("messaging.batch.message_count", len(results))
        return results

    async def _store_requests(
        self, requests: Iterable[TimerRequest], on_conflict: OnConflict, transaction: object | None
    ) -> list[PutResult]:
        # Validated as the store reads them, each with its payload's JSON text (no caller
        # sees these timers before they are stored).
        timers: Iterable[NewTimer] = self._resolve(requests, straight_to_store=True)
        if not self._opened:  # opening creates the namespace: not for a batch that is refused
            timers = list(timers)
        return await self.put(timers, on_conflict=on_conflict, transaction=transaction)

    def prepare(self, requests: Iterable[TimerRequest]) -> list[NewTimer]:
        """Validate requests into storable timers (raises InvalidInput naming the field)."""
        return list(self._resolve(requests))

    def _resolve(
        self, requests: Iterable[TimerRequest], *, straight_to_store: bool = False
    ) -> Iterator[NewTimer]:
        """Each request validated as it is read, so a store can send the timers read so far
        while the rest are still being validated. A bad one raises InvalidInput naming its
        field, behind its index (``[3].timezone``) unless it is the only request. "Now" is
        read here, when the batch is given, not when the store gets to each request, and so
        is the trace context (tracing on, and a span current) each of them stores."""
        now = self.clock.now()
        namespace, producer, settings = self.namespace, self.producer_id(), self.settings
        tracing = self._tracing()
        trace_context = None if tracing is None else tracing.current_text()
        max_attempts, max_payload_bytes = settings.max_attempts, settings.max_payload_bytes

        def resolved() -> Iterator[NewTimer]:
            items = iter(requests)
            for index, request in enumerate(items):
                try:
                    yield request.resolve(
                        namespace,
                        now,
                        max_attempts,
                        max_payload_bytes,
                        producer=producer,
                        straight_to_store=straight_to_store,
                        trace_context=trace_context,
                    )
                except InvalidInput as exc:
                    if index == 0 and next(items, _END) is _END:
                        raise
                    raise InvalidInput(f"[{index}].{exc.field}", exc.message) from exc

        return resolved()

    async def put(
        self,
        timers: Iterable[NewTimer],
        *,
        on_conflict: OnConflict = "update",
        transaction: object | None = None,
    ) -> list[PutResult]:
        """Store validated timers (see :meth:`prepare`); ``transaction`` as for :meth:`schedule`."""
        check_on_conflict(on_conflict)
        await self.open()
        if transaction is not None:
            outbox = self._outbox("scheduling inside your own transaction")
            held = await held_async(transaction)
            return await outbox.put_timers_in(
                held.connection, timers, on_conflict, self.clock.now()
            )
        return await self.store.put_timers(timers, on_conflict, self.clock.now())

    def _outbox(self, doing: str) -> OutboxStore:
        return require(self.store.outbox, "outbox", self.store, field="transaction", doing=doing)

    async def emit(
        self,
        type: str,
        payload: JSON = None,
        *,
        key: str | None = None,
        subject: str | None = None,
        correlation_id: str | None = None,
        max_attempts: int | None = None,
        priority: int | None = None,
        transaction: object | None = None,
    ) -> PutResult:
        """Emit an event now: a timer due at once, delivered like any other.

        ``transaction``: the caller's own transaction, as for :meth:`schedule` — the event
        exists, and is delivered, only if that transaction commits (the transactional outbox).
        """
        return await self.schedule(
            type,
            payload,
            delay=0,
            key=key,
            subject=subject,
            correlation_id=correlation_id,
            max_attempts=max_attempts,
            priority=priority,
            on_conflict="keep",
            transaction=transaction,
        )
