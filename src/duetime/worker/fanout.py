"""Handing claimed events on to their destinations: one delivery row per destination.

An event several destinations want (across every live node's handlers and routes) is not run
here: it becomes deliveries, each retried and dead-lettered on its own, claimed like timers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import datetime

from duetime.bus.routes import Fan
from duetime.model import Claimed, FanOut, Finish, Outcome
from duetime.worker import attempts
from duetime.worker.completer import Completer
from duetime.worker.refusals import write_apart
from duetime.worker.shared import Shared
from duetime.worker.slots import Slots

_HandedOn = tuple[set[int], dict[int, Exception]]
"""What writing fan-outs came to: (events taken over meanwhile, events the store refused with
its reason)."""

log = logging.getLogger("duetime.worker")


class FanOuter:
    """Writes the deliveries of claimed events, in one transaction a batch."""

    def __init__(
        self,
        shared: Shared,
        slots: Slots,
        completer: Completer,
        retry_delay: attempts.RetryDelay,
    ) -> None:
        """``slots`` hears of the rows a batch holds (:meth:`start`) until it is written or
        failed; the outcomes of events not handed on go forward to the ``completer``."""
        self.shared = shared
        self.clock = shared.clock
        self._slots = slots
        self.completer = completer
        self.retry_delay = retry_delay
        self.fanned_out = 0
        """Events this worker fanned out (their deliveries are due too: a tick claims again)."""
        self.lost = 0
        """Events another node had taken over before they could be fanned out."""

    def start(self, fans: Sequence[tuple[Claimed, Fan]], loop: asyncio.AbstractEventLoop) -> None:
        """Hand ``fans`` on in a task of their own; their rows hold slots until it ends."""
        task = loop.create_task(self.fan_out(fans))
        self._slots.fanning((claimed.timer.id for claimed, _ in fans), task)

    async def _hand_on(self, todo: list[FanOut], now: datetime) -> _HandedOn:
        """Write the deliveries of ``todo``. An event the store refuses does not keep the others
        from being handed on (see :mod:`~duetime.worker.refusals`)."""
        shared = self.shared

        async def write(batch: Sequence[FanOut]) -> _HandedOn:
            return await shared.store.fan_out(batch, shared.node_id, now), {}

        return await write_apart(todo, write, _refused, _merged)

    async def fan_out(self, fans: Sequence[tuple[Claimed, Fan]]) -> None:
        """Hand claimed events on as one delivery row per destination, in one transaction.

        An event already stale is expired instead. If the write fails the events retry with
        backoff; if this task is cancelled (shutdown) they are released. Both outcomes are
        fenced, so they are dropped as lost should the fan-out have committed after all.
        """
        now = self.clock.now()
        record = self.completer.record
        todo: list[FanOut] = []
        for claimed, fan in fans:
            timer = claimed.timer
            if attempts.is_stale(timer, now):
                record(timer, attempts.expired(timer, claimed.attempt, now))
            else:
                todo.append(
                    FanOut(
                        timer.id, claimed.attempt, timer.key, fan.destinations, timer.claim_token
                    )
                )
        wanted = {f.timer_id for f in todo}
        try:
            lost, refused = await self._hand_on(todo, now) if todo else (set(), {})
        except asyncio.CancelledError:
            for claimed, _ in fans:
                if claimed.timer.id in wanted:
                    released = Finish(claimed.timer.id, claimed.attempt, Outcome.RELEASED)
                    record(claimed.timer, released)
            raise
        except Exception as exc:
            log.exception("fanning out %d events failed; they will be retried", len(todo))
            error = f"fan-out failed: {attempts.describe(exc)}"
            for claimed, _ in fans:
                if claimed.timer.id in wanted:
                    timer, attempt = claimed.timer, claimed.attempt
                    failed = attempts.failed(
                        timer, attempt, error, None, self.clock.now(), self.retry_delay
                    )
                    record(timer, failed)
            return
        finally:
            self._slots.fanned(claimed.timer.id for claimed, _ in fans)
        for claimed, _ in fans:
            if (reason := refused.get(claimed.timer.id)) is not None:
                timer, attempt = claimed.timer, claimed.attempt
                error = f"fan-out failed: {attempts.describe(reason)}"
                record(timer, attempts.failed(timer, attempt, error, None, now, self.retry_delay))
        handed = [f for f in todo if f.timer_id not in lost and f.timer_id not in refused]
        self.fanned_out += len(handed)
        if lost:
            self.lost += len(lost)
            log.warning(
                "%d events had been taken over by other nodes before fanning out", len(lost)
            )
        observers = self.shared.observers
        if observers:
            by_id = {claimed.timer.id: claimed.timer for claimed, _ in fans}
            for f in handed:
                for observer in observers:
                    observer.finished(by_id[f.timer_id], Outcome.FANNED_OUT)


async def _refused(fan_out: FanOut, exc: Exception) -> _HandedOn:
    log.error("the store refused the fan-out of timer id %d", fan_out.timer_id)
    return set(), {fan_out.timer_id: exc}


def _merged(first: _HandedOn, second: _HandedOn) -> _HandedOn:
    return first[0] | second[0], first[1] | second[1]
