"""A transactional handler's attempt: its writes and its completion commit together.

The handler runs inside the store's transaction that records its attempt done, so its effects
happen exactly once. Any other outcome (an exception, Snooze, Dead…) rolls the handler's
writes back and is recorded like any handler's; so is a ``SystemExit``, ``KeyboardInterrupt``
or bare ``BaseException`` it raises (as :class:`~duetime.support.threads.Escaped`, an Exception the
transaction rolls back on).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from enum import Enum
from typing import Any

from duetime.handlers import Event, Handler
from duetime.model import Finish, Timer
from duetime.outcomes import HandlerOutcome
from duetime.support.threads import Escaped
from duetime.worker.shared import Shared

log = logging.getLogger("duetime.worker")


class Settled(Enum):
    """How an attempt ended that leaves no outcome to record."""

    COMMITTED = "committed"
    """A transactional handler's completion committed with its writes."""
    TAKEN_OVER = "taken over"
    """Another node took the attempt over before a transactional handler could commit: nothing
    was written."""


Result = Finish | Settled
"""What an attempt came to: the outcome to record, or why there is none."""


async def in_transaction(
    shared: Shared,
    handler: Handler,
    event: Event,
    timer: Timer,
    attempt: int,
    started_at: Callable[[Timer], datetime | None],
    judge: Callable[[Any, BaseException | None], Finish],
) -> Result:
    """Run ``handler`` in the transaction completing ``timer``'s ``attempt`` (begun at
    ``started_at(timer)``); ``judge(result, error)`` is the outcome of one that did not
    commit."""
    transactions = handler.transactions or shared.store.transactions
    returned: list[Any] = []

    def effect(connection: Any) -> Any:
        try:
            result = handler.func(event, connection)
        except Exception:
            raise
        except BaseException as exc:  # rolls the writes back, then recorded as its failure
            raise Escaped(exc) from exc
        if inspect.isawaitable(result):
            return _keep_result(result, returned)
        returned.append(result)
        if isinstance(result, HandlerOutcome):
            raise result  # roll the writes back; recorded below
        return None

    try:
        ours = await transactions.complete_in_transaction(
            timer.id,
            attempt,
            shared.node_id,
            shared.clock.now(),
            effect,
            claim_token=timer.claim_token,
            started_at=started_at(timer),
        )
    except Exception as exc:
        return judge(None, exc)
    if not ours:
        log.warning(
            "attempt %d of %s was taken over; nothing was written",
            attempt,
            timer.key,
            extra=shared.about(timer, attempt),
        )
        return Settled.TAKEN_OVER
    if returned and isinstance(returned[-1], HandlerOutcome):
        return judge(returned[-1], None)
    return Settled.COMMITTED


async def _keep_result(awaitable: Awaitable[Any], returned: list[Any]) -> None:
    """Await an async transactional handler; an explicit outcome rolls its writes back, and so
    does a ``SystemExit``, ``KeyboardInterrupt`` or bare ``BaseException`` (as :class:`Escaped`,
    an Exception the transaction rolls back on)."""
    try:
        result = await awaitable
    except (Exception, asyncio.CancelledError, GeneratorExit):
        raise
    except BaseException as exc:
        raise Escaped(exc) from exc
    returned.append(result)
    if isinstance(result, HandlerOutcome):
        raise result
