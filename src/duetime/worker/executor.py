"""Running one attempt: the worker's executor.

It decides what a claimed row needs (a handler, or an outcome without one: expired, no
destination), runs the handler — each attempt a task of its own, started one way: an async
handler is awaited in it, a sync one in a thread, a transactional one inside the store's
transaction — and hands the outcome forward to the completer.
What a result means is :mod:`duetime.worker.attempts`' pure mapping.

Two promises hold whatever kind the handler is. A row starts only while this worker's lease
on it is good, checked at the moment the handler begins (in its thread, for a sync one): a
worker paused past its lease must not start what another node may have taken over. And what
a handler raises is its attempt's failure, never the worker's end: ``SystemExit``,
``KeyboardInterrupt`` or a bare ``BaseException`` raised out of a task would stop the event
loop (and a restarted worker would claim the same row and stop again), so they are caught and
recorded like any error; a ``CancelledError`` is the worker's only when it cancelled the task.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
from collections.abc import Callable, Coroutine, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from duetime.clock import Clock
from duetime.dispatch import Dispatch, Target
from duetime.handlers import Event, Handler
from duetime.model import Claimed, Finish, Outcome, Timer
from duetime.model.fast_records import make_done
from duetime.outcomes import HandlerOutcome
from duetime.support.eventloop import start_task
from duetime.support.precise_sleep import sleep_precisely
from duetime.support.threads import Escaped, NotStarted
from duetime.timemath.backoff import Backoff
from duetime.worker import attempts
from duetime.worker.completer import Completer
from duetime.worker.leases import Held
from duetime.worker.shared import Shared
from duetime.worker.shared_task import start_shared
from duetime.worker.slots import Slots
from duetime.worker.transactional import Result, Settled, in_transaction

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from duetime.observability.otel import Tracing

log = logging.getLogger("duetime.worker")


class Executor:
    """Starts attempts; each running one holds a slot (reported to :class:`Slots`) and hands
    its outcome forward to the :class:`Completer`."""

    def __init__(
        self,
        shared: Shared,
        slots: Slots,
        dispatch: Dispatch,
        backoff: Backoff,
        rng: random.Random,
        completer: Completer,
    ) -> None:
        """``slots`` hears of every attempt running and ended; ``completer`` takes every
        outcome."""
        self.shared = shared
        self.clock = shared.clock
        self.observers = shared.observers
        self.dispatch = dispatch
        self.completer = completer
        self._slots = slots
        self._backoff = backoff
        self._rng = rng
        self._tracing: Tracing | None = shared.tracing
        self.committed = 0
        """Transactional attempts whose completion committed with the handler's writes (done,
        though the completer never saw them)."""
        self.lost = 0
        """Transactional attempts another node had taken over before they could commit."""

    def retry_delay(self, attempt: int) -> timedelta:
        return self._backoff.delay(attempt, self._rng)

    def start(
        self,
        claimed: Claimed,
        target: Target,
        start_at: datetime | None,
        loop: asyncio.AbstractEventLoop,
        held: Held,
    ) -> None:
        """Start one attempt as a task of its own: now, or (claimed ahead) held until
        ``start_at`` and started only if its lease is still good then. Every kind of handler
        starts this one way (see :meth:`_attempt`)."""
        task = start_task(loop, self._attempt(claimed, target, start_at, held))
        if not task.done():  # done: it never suspended (see start_task), its slot is free
            timer = claimed.timer
            self._slots.running(timer.id, timer.claim_token, task)

    def start_now(
        self, items: Sequence[tuple[Claimed, Target, Held]], loop: asyncio.AbstractEventLoop
    ) -> None:
        """Start attempts due now (none claimed ahead), sharing one task until one waits (see
        :mod:`~duetime.worker.shared_task`): a task a batch, not one a timer."""
        if items:
            start_shared(loop, items, self._begin, self._moved)

    def _begin(self, item: tuple[Claimed, Target, Held]) -> Coroutine[Any, Any, None]:
        claimed, target, held = item
        return self._attempt(claimed, target, None, held)

    def _moved(
        self, items: Sequence[tuple[Claimed, Target, Held]], task: asyncio.Task[None]
    ) -> None:
        running = self._slots.running
        for claimed, _, _ in items:
            timer = claimed.timer
            running(timer.id, timer.claim_token, task)

    # -- one attempt ------------------------------------------------------------------------
    async def _attempt(
        self, claimed: Claimed, target: Target, start_at: datetime | None, held: Held
    ) -> None:
        """One attempt, after waiting (when asked) for the instant it was claimed ahead of:
        what it comes to goes forward to the completer. Here alone is a cancellation, a
        tracing span and an outcome mapped, whatever the handler.

        The lease is read in the step in which the handler begins, never when the task is made:
        where a task's first step does not run at once (Python 3.11, a loop with a task
        factory), it runs after every step ready before it, which may outlast the lease."""
        timer, attempt = claimed.timer, claimed.attempt
        started = False
        span: Span | None = None
        try:
            if start_at is not None:
                await _hold(self.clock, start_at)
            started = True
            now = self.clock.now()
            before = self._before(timer, attempt, target, held, now)
            if isinstance(before, Finish):
                result: Result = before
            elif self._tracing is None:
                result = await self._invoke(before, timer, attempt, held, now, None)
            else:
                span = self._tracing.start(timer, attempt, now - timer.due_at)
                with self._tracing.entered(span):  # its log lines name the attempt's trace
                    result = await self._invoke(before, timer, attempt, held, now, span)
        except _LeaseLost:
            result = _released(self.shared, timer, attempt)
        except Exception as exc:  # not the handler's (its errors are its outcome): ours
            result = _unstartable(self.shared, timer, attempt, exc)
        except asyncio.CancelledError:
            if started:
                result = attempts.interrupted(timer, attempt, self.clock.now())
            else:  # claimed ahead, never started: give it back as it was
                result = Finish(timer.id, attempt, Outcome.RELEASED)
        finally:
            self._slots.ended(timer.id)
        if span is not None and self._tracing is not None:
            self._tracing.end(span, _as_traced(result, timer, attempt))
        if type(result) is Finish:
            self.completer.record(timer, result)
        elif result is Settled.COMMITTED:
            self.completer.forget(timer)
            self.committed += 1
            for observer in self.observers:
                observer.finished(timer, Outcome.DONE)
        else:  # taken over: nothing was written, and nothing is to be
            self.completer.forget(timer)
            self.lost += 1

    def _before(
        self, timer: Timer, attempt: int, target: Target, held: Held, now: datetime
    ) -> Finish | Handler:
        """The handler to run ``now``, or the outcome when there is none to run (its lease ran
        out: given back unstarted; too late; no destination). ``now`` is the attempt's start
        (a sync handler's thread sends the instant it truly began, see :meth:`_began`), so the
        handler's event says when it fired."""
        if not self.shared.leases.usable(held, now):
            return _released(self.shared, timer, attempt)
        if attempts.is_stale(timer, now):  # recorded expired: no handler ever started
            return attempts.expired(timer, attempt, now)
        if not isinstance(target, Handler):  # None; a fan-out never comes this way
            return Finish(timer.id, attempt, Outcome.DEAD, error=self.dispatch.missing(timer))
        self.completer.started(timer, now)
        return target

    def _began(self, timer: Timer, attempt: int, at: datetime) -> None:
        """A sync handler of ``timer``'s ``attempt`` began in its thread at ``at`` (applied on
        the event loop): the instant its outcome records as the attempt's start."""
        self.completer.started(timer, at)
        self._tell_started(timer, attempt, at - timer.due_at)

    def _tell_started(self, timer: Timer, attempt: int, lateness: timedelta) -> None:
        for observer in self.observers:
            observer.started(timer, attempt, lateness)

    async def _invoke(
        self,
        handler: Handler,
        timer: Timer,
        attempt: int,
        held: Held,
        now: datetime,
        span: Span | None,
    ) -> Result:
        """Run the handler and judge what it came to. An async or transactional handler begins
        here, on the loop, ``now`` (its lease was just checked); a plain one in its thread,
        which checks the lease against the bound read here (else :class:`_LeaseLost`) and sends
        the instant it began back to the loop."""
        event = Event.from_timer(timer, attempt, handler.destination)
        if handler.is_async or handler.transactional:
            self._tell_started(timer, attempt, now - timer.due_at)
            if handler.transactional:
                judge = functools.partial(self._judge, timer, attempt, span=span)
                started_at = self.completer.start_of
                return await in_transaction(
                    self.shared, handler, event, timer, attempt, started_at, judge
                )
            may_start: Callable[[], bool] | None = None
        else:
            may_start = functools.partial(
                _begins_in_thread,
                self.clock,
                self.shared.leases.start_by(held),
                asyncio.get_running_loop(),
                functools.partial(self._began, timer, attempt),
            )
        task = asyncio.current_task()
        try:
            if may_start is None:
                result: Any = await handler.func(event)
            else:
                result = await handler(event, may_start)
        except NotStarted:
            raise _LeaseLost from None
        except BaseException as exc:
            if not _handlers_own(exc, task):
                raise
            return self._judge(timer, attempt, None, exc, span)
        return self._judge(timer, attempt, result, None)

    def _judge(
        self,
        timer: Timer,
        attempt: int,
        result: Any,
        error: BaseException | None,
        span: Span | None = None,
    ) -> Finish:
        """:func:`attempts.finish_for`, saying in the log (and on the attempt's ``span``, when
        traced) when a handler failed."""
        if error is None and not isinstance(result, HandlerOutcome):
            # nearly every attempt: no clock read, and made through its slots
            return make_done(timer.id, attempt, None, None)
        if isinstance(error, Escaped):  # what the handler raised, as it raised it
            error = error.error
        if error is not None and span is not None and self._tracing is not None:
            self._tracing.failed(span, error)
        if error is not None and not isinstance(error, HandlerOutcome):
            log.warning(
                "handler for %s (key %s) failed: %s",
                timer.type,
                timer.key,
                attempts.describe(error),
                extra=self.shared.about(timer, attempt),
            )
        return attempts.finish_for(
            timer, attempt, result, error, self.clock.now(), self.retry_delay
        )


def _begins_in_thread(
    clock: Clock,
    start_by: datetime,
    loop: asyncio.AbstractEventLoop,
    began: Callable[[datetime], None],
) -> bool:
    """Asked in a sync handler's thread as it begins: whether its lease (``start_by``, read on
    the loop) still allows it. If so, the instant goes back to the loop (``began`` runs there,
    before the handler's result does: both travel through ``call_soon_threadsafe``, in order);
    nothing of the worker's is touched here."""
    now = clock.now()
    if now >= start_by:
        return False
    if not loop.is_closed():  # past the worker's grace its loop may be gone: none to tell
        loop.call_soon_threadsafe(began, now)
    return True


def _released(shared: Shared, timer: Timer, attempt: int) -> Finish:
    """A row whose lease ran out before its handler could begin: given back unstarted."""
    log.warning(
        "timer %s waited past its lease: given back unstarted",
        timer.key,
        extra=shared.about(timer, attempt),
    )
    return Finish(timer.id, attempt, Outcome.RELEASED)


def _unstartable(shared: Shared, timer: Timer, attempt: int, exc: Exception) -> Finish:
    """A row the worker could not start (its own error, not the handler's): said in the log."""
    log.error(
        "could not start %s (key %s)",
        timer.type,
        timer.key,
        exc_info=exc,
        extra=shared.about(timer, attempt),
    )
    return attempts.unstartable(timer, attempt, exc)


async def _hold(clock: Clock, until: datetime) -> None:
    """Sleep until ``until`` by ``clock``, read again after every sleep: the sleep counts the
    monotonic clock, which the database's clock (a bound advancing a little slower) may not
    have caught up with, and the clock may have been set back meanwhile. The sleep ends on the
    system's timer, not at one of the loop's millisecond ticks (``sleep_precisely``)."""
    while True:
        remaining = (until - clock.now()).total_seconds()
        if remaining <= 0:
            return
        await sleep_precisely(remaining)


def _as_traced(result: Result, timer: Timer, attempt: int) -> Finish | None:
    """What an attempt's span ends with: its outcome, None when committed (done), and an
    attempt taken over as lost."""
    if result is Settled.COMMITTED:
        return None
    if result is Settled.TAKEN_OVER:
        return Finish(timer.id, attempt, Outcome.LOST)
    return result


class _LeaseLost(Exception):
    """A row's lease ran out before its handler could begin: it must not start."""


def _handlers_own(error: BaseException, task: asyncio.Task[Any] | None) -> bool:
    """Whether ``error``, out of awaiting a handler in ``task``, is the handler's failure rather
    than the worker stopping the task: a ``CancelledError`` while nobody cancelled the task, a
    ``GeneratorExit`` raised during the task's own step (not by closing its coroutine), and
    everything else."""
    if isinstance(error, asyncio.CancelledError):
        return task is not None and not task.cancelling()
    if isinstance(error, GeneratorExit):
        try:
            return task is not None and asyncio.current_task() is task
        except RuntimeError:  # no running loop: the coroutine is being closed
            return False
    return True
