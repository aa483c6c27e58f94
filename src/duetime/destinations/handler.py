"""Turn a destination into a handler, so the worker's retry and dead-letter rules apply to it.

``app.handler("order.paid")(as_handler(webhook))`` sends every ``order.paid`` event to the
webhook. A retryable :class:`~duetime.destinations.base.DeliveryFailed` becomes
:class:`~duetime.outcomes.Retry` (after the receiver's ``Retry-After`` when it gave one, else
after the backoff policy's delay); one that is not retryable becomes
:class:`~duetime.outcomes.Dead` at once, with the receiver's response in the reason.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace

from duetime.destinations.base import Delivery, DeliveryFailed, Destination
from duetime.handlers import Event
from duetime.observability.attempt_context import ATTEMPT_TRACING
from duetime.outcomes import Dead, Retry


async def deliver_event(destination: Destination, event: Event) -> None:
    """Deliver ``event`` to ``destination``, translating failures into the worker's outcomes.

    Inside a traced attempt, the delivery runs in a client span whose ``traceparent`` (and
    ``tracestate``) the destination sends with the message (``Delivery.trace_headers``)."""
    delivery = Delivery.from_event(event, destination.name)
    try:
        tracing = ATTEMPT_TRACING.get()
        if tracing is None:
            await destination.deliver(delivery)
        else:
            headers: dict[str, str] = {}
            with tracing.sending(destination.name, event.type, delivery.delivery_id, headers):
                await destination.deliver(replace(delivery, trace_headers=headers))
    except DeliveryFailed as exc:
        reason = f"{destination.name}: {exc.describe()}"
        if exc.retryable:
            raise Retry(reason, delay=exc.retry_after) from exc
        raise Dead(reason) from exc


def as_handler(destination: Destination) -> Callable[[Event], Awaitable[None]]:
    """An async handler that delivers each event it receives to ``destination``."""

    async def deliver(event: Event) -> None:
        await deliver_event(destination, event)

    deliver.__name__ = deliver.__qualname__ = f"deliver_to_{destination.name}"
    return deliver
