"""Running one attempt: the worker's executor.

It decides what a claimed row needs (a handler, or an outcome without one: expired, no
destination), runs the handler — an async one as its own task, a sync one in a thread, a
transactional one inside the store's transaction — and hands the outcome to the completer.
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
from collections.abc import Callable, Coroutine
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

from duetime.clock import Clock
from duetime.dispatch import Dispatch, Target
from duetime.handlers import Event, Handler
from duetime.model import Claimed, Finish, Outcome, Timer
from duetime.outcomes import HandlerOutcome
from duetime.support.eventloop import on_loop, start_task, starts_at_once
from duetime.support.precise_sleep import sleep_precisely
from duetime.support.threads import Escaped, NotStarted
from duetime.timemath.backoff import Backoff
from duetime.worker import attempts
from duetime.worker.completer import Completer
from duetime.worker.leases import Held
from duetime.worker.shared import Shared
from duetime.worker.slots import Slots
from duetime.worker.transactional import Result, Settled, in_transaction

if TYPE_CHECKING:
    from contextvars import Context

    from opentelemetry.trace import Span

    from duetime.observability.otel import Tracing

log = logging.getLogger("duetime.worker")


class Executor:
    """Starts attempts; each running one holds a slot (reported to :class:`Slots`)."""

    def __init__(
        self,
        shared: Shared,
        slots: Slots,
        dispatch: Dispatch,
        backoff: Backoff,
        rng: random.Random,
        completer: Completer,
        start_ready: Callable[[], None],
    ) -> None:
        """``slots`` hears of every attempt running and ended; ``start_ready`` starts claimed
        rows waiting for a slot."""
        self.shared = shared
        self.clock = shared.clock
        self.observers = shared.observers
        self.dispatch = dispatch
        self.completer = completer
        self._slots = slots
        self._backoff = backoff
        self._rng = rng
        self._start_ready = start_ready
        self._tracing: Tracing | None = shared.tracing

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
        """Start one attempt: now, or (claimed ahead) held until ``start_at`` and started only
        if its lease is still good then."""
        if start_at is None:
            self._launch(claimed, loop, target, held)
        else:
            timer = claimed.timer
            task = loop.create_task(self._run_one(claimed, start_at, target=target, held=held))
            self._slots.running(timer.id, timer.claim_token, task)

    # -- starting ---------------------------------------------------------------------------
    def _launch(
        self,
        claimed: Claimed,
        loop: asyncio.AbstractEventLoop,
        target: Target = None,
        held: Held | None = None,
    ) -> None:
        """Start one attempt now: the hot path of a busy worker, so an async handler's
        coroutine runs as the task with one thin wrapper (:func:`_contained`) around it.

        Where tasks do not start at once (Python 3.11, a loop with its own task factory), the
        handler would begin at the task's first step, which may come long after a lease checked
        here (other steps ready before it, a process paused or starved of CPU): the attempt
        then runs as :meth:`_run_one`, which checks the lease in the step the handler begins."""
        timer, attempt = claimed.timer, claimed.attempt
        if not starts_at_once(loop):
            task = loop.create_task(self._run_one(claimed, None, target=target, held=held))
            self._slots.running(timer.id, timer.claim_token, task)
            return
        try:
            before = self._before(timer, attempt, target, held, launching=True)
        except Exception as exc:
            before = _unstartable(self.shared, timer, attempt, exc)
        if isinstance(before, Finish):
            self.completer.record(timer, before)
            return
        # Traced: the attempt's span starts now, and its task runs where the span is current.
        span: Span | None = None
        context: Context | None = None
        if self._tracing is not None:
            span = self._tracing.start(timer, attempt, self.clock.now() - timer.due_at)
            context = self._tracing.context_for(span)
        if not before.is_async or before.transactional:
            task = loop.create_task(
                self._run_one(claimed, None, before, held=held, span=span), context=context
            )
            self._slots.running(timer.id, timer.claim_token, task)
            return
        try:
            coro = before.func(Event.from_timer(timer, attempt, before.destination))
        except Exception as exc:  # e.g. a handler that takes no argument
            self.completer.record(
                timer, self._ended(span, self._judge(timer, attempt, None, exc, span))
            )
            return
        task = start_task(loop, _contained(cast(Coroutine[Any, Any, Any], coro)), context)
        if task.done():  # it never suspended (see start_task)
            self._handler_done(claimed, span, task)
            return
        task.add_done_callback(functools.partial(self._handler_done, claimed, span))
        self._slots.running(timer.id, timer.claim_token, task)

    def _handler_done(self, claimed: Claimed, span: Span | None, task: asyncio.Task[Any]) -> None:
        timer, attempt = claimed.timer, claimed.attempt
        self._slots.ended(timer.id)
        if (
            span is None
            and not task.cancelled()
            and task.exception() is None
            and not isinstance(task.result(), HandlerOutcome)
        ):
            self.completer.done(timer, attempt)  # it returned: done (nearly every job)
            return
        if task.cancelled() and task.cancelling():  # the worker cancelled it (shutdown)
            finish = attempts.interrupted(timer, attempt, self.clock.now())
        else:
            error = _raised(task) if task.cancelled() else task.exception()
            if error is None or span is None or self._tracing is None:
                finish = self._judge(timer, attempt, None if error else task.result(), error, span)
            else:
                with self._tracing.entered(span):  # its log line names the attempt's trace
                    finish = self._judge(timer, attempt, None, error, span)
        self.completer.record(timer, self._ended(span, finish))

    def _ended(self, span: Span | None, finish: Finish) -> Finish:
        """``finish``, once the attempt's span (if traced) has ended with it."""
        if span is not None and self._tracing is not None:
            self._tracing.end(span, finish)
        return finish

    def _before(
        self,
        timer: Timer,
        attempt: int,
        target: Target,
        held: Held | None = None,
        launching: bool = False,
    ) -> Finish | Handler:
        """The handler to run now, or the outcome when there is none to run (its lease ran
        out: given back unstarted). ``launching``: an async handler found here begins at once
        (:meth:`_launch`); any other begins later, in :meth:`_begins`, which tells the
        observers then."""
        now = self.clock.now()
        if held is not None and not self.shared.leases.usable(held, now):
            return _released(self.shared, timer, attempt)
        if attempts.is_stale(timer, now):  # recorded expired: no handler ever started
            return attempts.expired(timer, attempt, now)
        if not isinstance(target, Handler):  # None; a fan-out never comes this way
            return Finish(timer.id, attempt, Outcome.DEAD, error=self.dispatch.missing(timer))
        self.completer.started(timer, now)  # the attempt's start, as its outcome records it
        if launching and target.is_async and not target.transactional:
            self._observe_start(timer, attempt, now - timer.due_at)
        return target

    def _observe_start(self, timer: Timer, attempt: int, lateness: timedelta) -> None:
        for observer in self.observers:
            observer.started(timer, attempt, lateness)

    # -- one attempt ------------------------------------------------------------------------
    async def _run_one(
        self,
        claimed: Claimed,
        start_at: datetime | None = None,
        handler: Handler | None = None,
        *,
        target: Target = None,
        held: Held | None = None,
        span: Span | None = None,
    ) -> None:
        """One attempt, after waiting (when asked) for the instant it was claimed ahead of;
        ``handler`` when :meth:`_before` already ran, else ``target`` is where the row goes (see
        :meth:`Dispatch.target`). ``span``: the attempt's, when :meth:`_launch` started it
        (this task then runs where it is current); a held row's starts here."""
        timer, attempt = claimed.timer, claimed.attempt
        started = False
        try:
            if start_at is not None:
                await _hold(self.clock, start_at)
            started = True
            before = handler or self._before(timer, attempt, target, held)
            may_start = functools.partial(
                self._begins, timer, attempt, held, asyncio.get_running_loop()
            )
            if isinstance(before, Finish):
                result: Result = before
            elif self._tracing is None or span is not None:
                result = await self._invoke(before, timer, attempt, span, may_start)
            else:
                span = self._tracing.start(timer, attempt, self.clock.now() - timer.due_at)
                with self._tracing.entered(span):
                    result = await self._invoke(before, timer, attempt, span, may_start)
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
        if isinstance(result, Finish):
            self.completer.record(timer, result)
            return
        self.completer.forget(timer)
        if result is Settled.COMMITTED:
            self.shared.stats.outcomes[Outcome.DONE.value] += 1
            for observer in self.observers:
                observer.finished(timer, Outcome.DONE)
        self._start_ready()

    def _begins(
        self, timer: Timer, attempt: int, held: Held | None, loop: asyncio.AbstractEventLoop
    ) -> bool:
        """Called as the handler begins (in its thread, for a plain one): whether its lease
        still allows it, and if so, that instant is the attempt's recorded start, and the
        lateness the observers are told (on the event loop, where they always run)."""
        now = self.clock.now()
        if held is not None and not self.shared.leases.usable(held, now):
            return False
        self.completer.started(timer, now)
        lateness = now - timer.due_at
        if on_loop(loop):
            self._observe_start(timer, attempt, lateness)
        elif not loop.is_closed():  # past the worker's grace its loop may be gone: none to tell
            loop.call_soon_threadsafe(self._observe_start, timer, attempt, lateness)
        return True

    async def _invoke(
        self,
        handler: Handler,
        timer: Timer,
        attempt: int,
        span: Span | None = None,
        may_start: Callable[[], bool] | None = None,
    ) -> Result:
        """Run the handler, if ``may_start`` (the lease check) still says yes as it begins
        (else :class:`_LeaseLost`)."""
        event = Event.from_timer(timer, attempt, handler.destination)
        begins_on_loop = handler.is_async or handler.transactional  # else it begins in its thread
        if begins_on_loop and may_start is not None and not may_start():
            raise _LeaseLost
        if handler.transactional:
            judge = functools.partial(self._judge, timer, attempt, span=span)
            started_at = self.completer.start_of
            return await in_transaction(
                self.shared, handler, event, timer, attempt, started_at, judge
            )
        task = asyncio.current_task()
        try:
            result: Any = await handler(event, may_start)
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
            return Finish(timer.id, attempt, Outcome.DONE)  # nearly every attempt: no clock read
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


async def _contained(coro: Coroutine[Any, Any, Any]) -> Any:
    """Await a handler's coroutine as its task, so that a ``SystemExit`` or
    ``KeyboardInterrupt`` it raises ends the attempt (as :class:`Escaped`) and not the event
    loop, which an asyncio task re-raises them into. Anything else passes as it is: the task
    keeps it as its exception, or (a ``CancelledError``) is cancelled."""
    try:
        return await coro
    except (SystemExit, KeyboardInterrupt) as exc:
        raise Escaped(exc) from exc


def _raised(task: asyncio.Task[Any]) -> BaseException | None:
    """The ``CancelledError`` a cancelled handler task ended with (one the handler raised
    itself, when nobody cancelled the task)."""
    try:
        task.result()
    except asyncio.CancelledError as exc:
        return exc
    return None  # pragma: no cover - a cancelled task always raises


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
