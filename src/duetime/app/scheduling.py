"""How the timers part stores requests: validated into timers as the store reads them, or stored
inside a caller's own transaction through the store's outbox part.

:class:`TimerWrites` is what :class:`duetime.app.timers.Timers` schedules through. Requests are
validated as the store reads them, so a large batch streams instead of being held twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from duetime.app.context import AppContext
from duetime.app.outbox import held_async
from duetime.app.run_windows import placed_evenly, windows_placed
from duetime.errors import InvalidInput
from duetime.model import NewTimer, OnConflict, PutResult
from duetime.requests import TimerRequest
from duetime.validation import check_on_conflict

_END = object()
"""What ``next`` returns past the last request (a request list may hold anything)."""


class TimerWrites:
    """Validate timer requests and store them, traced when tracing is on."""

    def __init__(self, context: AppContext) -> None:
        self._context = context

    async def schedule_many(
        self, requests: Iterable[TimerRequest], on_conflict: OnConflict, transaction: object | None
    ) -> list[PutResult]:
        """Store many timers in one transaction, in one ``duetime schedule`` span when traced
        (``duetime schedule {type}`` for a list of one request), whose context each stores."""
        context = self._context
        tracing = context.current_tracing()
        if tracing is None:
            return await self._store_requests(requests, on_conflict, transaction)
        one = requests[0].type if isinstance(requests, Sequence) and len(requests) == 1 else None
        with tracing.scheduling(context.namespace, one) as span:
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
        timers: Iterable[NewTimer] = self.resolve(requests, straight_to_store=True)
        if isinstance(requests, Sequence) and any(r.spread == "even" for r in requests):
            timers = placed_evenly(list(timers))  # an even group needs all of its members
        if not self._context.opened:  # opening creates the namespace: not for a refused batch
            timers = list(timers)
        return await self.put(timers, on_conflict, transaction)

    def resolve(
        self, requests: Iterable[TimerRequest], *, straight_to_store: bool = False
    ) -> Iterator[NewTimer]:
        """Each request validated as it is read, so a store can send the timers read so far
        while the rest are still being validated. A bad one raises InvalidInput naming its
        field, behind its index (``[3].timezone``) unless it is the only request. "Now" is
        read here, when the batch is given, not when the store gets to each request, and so
        is the trace context (tracing on, and a span current) each of them stores."""
        context = self._context
        now = context.clock.now()
        namespace, producer, settings = context.namespace, context.producer_id(), context.settings
        tracing = context.current_tracing()
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
        self, timers: Iterable[NewTimer], on_conflict: OnConflict, transaction: object | None
    ) -> list[PutResult]:
        """Store validated timers, in the caller's ``transaction`` when one is given."""
        check_on_conflict(on_conflict)
        context = self._context
        await context.open()
        if transaction is not None:
            outbox = context.outbox("scheduling inside your own transaction")
            held = await held_async(transaction)
            return await outbox.put_timers_in(
                held.connection, timers, on_conflict, context.clock.now()
            )
        results = await context.store.put_timers(timers, on_conflict, context.clock.now())
        if any(result.timer.window is not None for result in results):
            results = await windows_placed(context, results)
        return results
