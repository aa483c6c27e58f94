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
import inspect
import logging
import random
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

from duetime.dispatch import Dispatch, Target
from duetime.handlers import Event, Handler
from duetime.model import Claimed, Finish, HeldRow, Outcome, Timer
from duetime.outcomes import HandlerOutcome
from duetime.support.eventloop import start_task
from duetime.support.threads import Escaped, NotStarted
from duetime.timemath.backoff import Backoff
from duetime.worker import attempts
from duetime.worker.completer import Completer
from duetime.worker.leases import Held
from duetime.worker.shared import Shared

if TYPE_CHECKING:
    from contextvars import Context

    from opentelemetry.trace import Span

    from duetime.observability.otel import Tracing

log = logging.getLogger("duetime.worker")

MIN_HOLD = 0.0005
"""Seconds: the shortest sleep while holding a row for its instant (no busy loop)."""

_TAKEN_OVER = Finish(0, 0, Outcome.LOST)
"""Marks an attempt another node took over before a transactional handler could commit."""


class Executor:
    """Starts attempts and keeps the tasks of those running (:attr:`in_flight`, by timer id)."""

    def __init__(
        self,
        shared: Shared,
        dispatch: Dispatch,
        backoff: Backoff,
        rng: random.Random,
        completer: Completer,
        start_ready: Callable[[], None],
    ) -> None:
        """``shared.capacity`` is set whenever an attempt ends (its slot is free again);
        ``start_ready`` starts claimed rows waiting for a slot."""
        self.shared = shared
        self.clock = shared.clock
        self.observers = shared.observers
        self.dispatch = dispatch
        self.completer = completer
        self.in_flight: dict[int, asyncio.Task[None]] = {}
        self._tokens: dict[int, int | None] = {}  # the claim token of each in_flight timer
        self._backoff = backoff
        self._rng = rng
        self._capacity = shared.capacity
        self._start_ready = start_ready
        self._tracing: Tracing | None = shared.tracing

    def held(self) -> Iterator[HeldRow]:
        """The :attr:`in_flight` timers, each with the token of the claim that took it."""
        tokens = self._tokens
        return ((timer_id, tokens.get(timer_id)) for timer_id in list(self.in_flight))

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
            self._tokens[claimed.timer.id] = claimed.timer.claim_token
            self.in_flight[claimed.timer.id] = loop.create_task(
                self._run_one(claimed, start_at, target=target, held=held)
            )

    async def drain(self, grace: float | None) -> None:
        """Wait for the running attempts; after ``grace`` seconds cancel them (they retry)."""
        if not self.in_flight:
            return
        tasks = list(self.in_flight.values())
        _, pending = await asyncio.wait(tasks, timeout=grace)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)

    # -- starting ---------------------------------------------------------------------------
    def _launch(
        self,
        claimed: Claimed,
        loop: asyncio.AbstractEventLoop,
        target: Target = None,
        held: Held | None = None,
    ) -> None:
        """Start one attempt now: the hot path of a busy worker, so an async handler's
        coroutine runs as the task with one thin wrapper (:func:`_contained`) around it."""
        timer, attempt = claimed.timer, claimed.attempt
        try:
            before = self._before(timer, attempt, target, held)
        except Exception as exc:
            before = self._unstartable(timer, attempt, exc)
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
            self._tokens[timer.id] = timer.claim_token
            self.in_flight[timer.id] = loop.create_task(
                self._run_one(claimed, None, before, held=held, span=span), context=context
            )
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
        self._tokens[timer.id] = timer.claim_token
        self.in_flight[timer.id] = task

    def _handler_done(self, claimed: Claimed, span: Span | None, task: asyncio.Task[Any]) -> None:
        timer, attempt = claimed.timer, claimed.attempt
        self.in_flight.pop(timer.id, None)
        self._tokens.pop(timer.id, None)
        self._capacity.set()
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
        self, timer: Timer, attempt: int, target: Target, held: Held | None = None
    ) -> Finish | Handler:
        """The handler to run now, or the outcome when there is none to run (its lease ran
        out: given back unstarted)."""
        now = self.clock.now()
        if held is not None and not self.shared.leases.usable(held, now):
            return self._released(timer, attempt)
        if attempts.is_stale(timer, now):  # recorded expired: no handler ever started
            return attempts.expired(timer, attempt, now)
        if not isinstance(target, Handler):  # None; a fan-out never comes this way
            return Finish(timer.id, attempt, Outcome.DEAD, error=self.dispatch.missing(timer))
        self.completer.started(timer, now)  # the attempt's start, as its outcome records it
        for observer in self.observers:
            observer.started(timer, attempt, now - timer.due_at)
        return target

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
                await self._hold(start_at)
            started = True
            before = handler or self._before(timer, attempt, target, held)
            may_start = functools.partial(self._begins, timer, held)
            if isinstance(before, Finish):
                finish: Finish | None = before
            elif self._tracing is None or span is not None:
                finish = await self._invoke(before, timer, attempt, span, may_start)
            else:
                span = self._tracing.start(timer, attempt, self.clock.now() - timer.due_at)
                with self._tracing.entered(span):
                    finish = await self._invoke(before, timer, attempt, span, may_start)
        except _LeaseLost:
            finish = self._released(timer, attempt)
        except Exception as exc:  # not the handler's (its errors are its outcome): ours
            finish = self._unstartable(timer, attempt, exc)
        except asyncio.CancelledError:
            if started:
                finish = attempts.interrupted(timer, attempt, self.clock.now())
            else:  # claimed ahead, never started: give it back as it was
                finish = Finish(timer.id, attempt, Outcome.RELEASED)
        finally:
            self.in_flight.pop(timer.id, None)
            self._tokens.pop(timer.id, None)
            self._capacity.set()
        if span is not None and self._tracing is not None:
            self._tracing.end(span, finish)
        if finish is _TAKEN_OVER or finish is None:
            self.completer.forget(timer)
        if finish is _TAKEN_OVER:
            self._start_ready()
            return
        if finish is None:  # a transactional handler's completion committed with its writes
            self.shared.stats.outcomes[Outcome.DONE.value] += 1
            for observer in self.observers:
                observer.finished(timer, Outcome.DONE)
            self._start_ready()
            return
        self.completer.record(timer, finish)

    def _released(self, timer: Timer, attempt: int) -> Finish:
        """A row whose lease ran out before its handler could begin: given back unstarted."""
        log.warning(
            "timer %s waited past its lease: given back unstarted",
            timer.key,
            extra=self.shared.about(timer, attempt),
        )
        return Finish(timer.id, attempt, Outcome.RELEASED)

    def _unstartable(self, timer: Timer, attempt: int, exc: Exception) -> Finish:
        log.error(
            "could not start %s (key %s)",
            timer.type,
            timer.key,
            exc_info=exc,
            extra=self.shared.about(timer, attempt),
        )
        return attempts.unstartable(timer, attempt, exc)

    async def _hold(self, until: datetime) -> None:
        """Sleep until ``until`` by the worker's clock, read again after every sleep: asyncio
        timers may fire a hair early, and the clock may have been set back meanwhile."""
        while True:
            remaining = (until - self.clock.now()).total_seconds()
            if remaining <= 0:
                return
            await asyncio.sleep(max(remaining, MIN_HOLD))

    def _begins(self, timer: Timer, held: Held | None) -> bool:
        """Called as the handler begins (in its thread, for a plain one): whether its lease
        still allows it, and if so, that instant is the attempt's recorded start."""
        now = self.clock.now()
        if held is not None and not self.shared.leases.usable(held, now):
            return False
        self.completer.started(timer, now)
        return True

    async def _invoke(
        self,
        handler: Handler,
        timer: Timer,
        attempt: int,
        span: Span | None = None,
        may_start: Callable[[], bool] | None = None,
    ) -> Finish | None:
        """Run the handler, if ``may_start`` (the lease check) still says yes as it begins
        (else :class:`_LeaseLost`); None when a transactional handler already recorded its
        outcome."""
        event = Event.from_timer(timer, attempt, handler.destination)
        on_loop = handler.is_async or handler.transactional  # else it begins in its thread
        if on_loop and may_start is not None and not may_start():
            raise _LeaseLost
        if handler.transactional:
            return await self._invoke_in_transaction(handler, event, timer, attempt, span)
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

    async def _invoke_in_transaction(
        self, handler: Handler, event: Event, timer: Timer, attempt: int, span: Span | None
    ) -> Finish | None:
        """The handler's writes and the completion commit together (exactly-once effects).

        Any other outcome (an exception, Snooze, Dead…) rolls the handler's writes back and is
        recorded like any handler's.
        """
        transactions = handler.transactions or self.shared.store.transactions
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
                self.shared.node_id,
                self.clock.now(),
                effect,
                claim_token=timer.claim_token,
                started_at=self.completer.start_of(timer),
            )
        except Exception as exc:
            return self._judge(timer, attempt, None, exc, span)
        if not ours:
            self.shared.stats.lost += 1
            log.warning(
                "attempt %d of %s was taken over; nothing was written",
                attempt,
                timer.key,
                extra=self.shared.about(timer, attempt),
            )
            return _TAKEN_OVER
        if returned and isinstance(returned[-1], HandlerOutcome):
            return self._judge(timer, attempt, returned[-1], None)
        return None

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
