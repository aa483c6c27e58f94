"""OpenTelemetry spans for duetime: schedule → process → send, linked across processes.

Imported only when tracing is on (:mod:`duetime.observability.tracing` decides), so a process that
does not trace never imports OpenTelemetry. Spans follow the messaging semantic conventions, with
``messaging.system = "duetime"``:

- ``duetime schedule {type}`` (PRODUCER) around ``schedule``/``emit`` (``duetime schedule``
  for a batch); its context is stored with each timer as W3C ``traceparent`` text;
- ``duetime process {type}`` (CONSUMER) around one attempt on a worker, a child of the stored
  context, with the handler running inside it (its own spans nest);
- ``duetime send {destination}`` (CLIENT) around a delivery to a destination, whose context
  goes out with the message as ``traceparent`` (and ``tracestate``).
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from datetime import timedelta
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from duetime.model import Finish, Outcome, Timer
from duetime.observability.attempt_context import ATTEMPT_TRACING
from duetime.outcomes import HandlerOutcome

Headers = Mapping[Any, Any] | Sequence[tuple[Any, Any]] | None
"""A message's headers as a client gives them: a mapping, or (Kafka) a list of pairs."""

SYSTEM = "duetime"
_W3C = TraceContextTextMapPropagator()
_FAILED = frozenset({Outcome.RETRY, Outcome.DEAD, Outcome.EXPIRED, Outcome.LOST})


def trace_context_text(context: trace.SpanContext) -> str | None:
    """A span context as stored with a timer: ``traceparent``, then `` tracestate`` if any."""
    if not context.is_valid:
        return None
    parent = f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"
    state = context.trace_state.to_header() if context.trace_state else ""
    return f"{parent} {state}" if state else parent


@functools.lru_cache(maxsize=1024)
def context_from_text(text: str | None) -> Context | None:
    """The parent context a stored trace context names; None when it names none.

    Parsed directly (duetime wrote it, from a valid span context): the propagator's parsing was
    a fifth of a traced attempt's cost. Cached, as the timers of one batch share one."""
    if not text:
        return None
    parent, _, state = text.partition(" ")
    try:
        _, trace_hex, span_hex, flags_hex = parent.split("-")
        context = trace.SpanContext(
            int(trace_hex, 16),
            int(span_hex, 16),
            is_remote=True,
            trace_flags=trace.TraceFlags(int(flags_hex, 16)),
            trace_state=trace.TraceState.from_header([state]) if state else None,
        )
    except ValueError:
        return None
    if not context.is_valid:
        return None
    return trace.set_span_in_context(trace.NonRecordingSpan(context))


def text_from_headers(headers: Headers) -> str | None:
    """The W3C trace context of a source message's headers or stream fields (names in any
    case, as text or bytes), if it is a valid one."""
    if not headers:
        return None
    found: dict[str, str] = {}
    for name, value in headers.items() if isinstance(headers, Mapping) else headers:
        lower = (name.decode("latin-1") if isinstance(name, bytes) else str(name)).lower()
        if lower in ("traceparent", "tracestate"):
            found[lower] = value.decode("latin-1") if isinstance(value, bytes) else str(value)
    if "traceparent" not in found:
        return None
    return trace_context_text(trace.get_current_span(_W3C.extract(found)).get_span_context())


def _version() -> str | None:
    try:
        return version("duetime")
    except PackageNotFoundError:  # pragma: no cover - run from a source tree
        return None


class Tracing:
    """duetime's tracer on the global provider, and the spans it opens."""

    def __init__(self, tracer_provider: trace.TracerProvider | None = None) -> None:
        self.tracer = trace.get_tracer("duetime", _version(), tracer_provider)

    # -- scheduling -------------------------------------------------------------------------
    @contextmanager
    def scheduling(self, namespace: str, type: str | None) -> Iterator[Span]:
        """The span around storing timers (``type`` None: a batch of any types)."""
        attributes: dict[str, Any] = {
            "messaging.system": SYSTEM,
            "messaging.operation.type": "send",
            "messaging.operation.name": "schedule",
            "duetime.namespace": namespace,
        }
        if type is not None:
            attributes["messaging.destination.name"] = type
        name = "duetime schedule" if type is None else f"duetime schedule {type}"
        with self.tracer.start_as_current_span(
            name, kind=SpanKind.PRODUCER, attributes=attributes
        ) as span:
            yield span

    @staticmethod
    def current_text() -> str | None:
        """The current span's context as a timer stores it (None: no span is current)."""
        return trace_context_text(trace.get_current_span().get_span_context())

    @staticmethod
    def text_from_headers(headers: Headers) -> str | None:
        """A source message's trace context (:func:`text_from_headers`)."""
        return text_from_headers(headers)

    # -- processing -------------------------------------------------------------------------
    def start(self, timer: Timer, attempt: int, lateness: timedelta) -> Span:
        """An attempt's ``duetime process`` span, started now as a child of the context the timer
        was stored under; :meth:`end` ends it."""
        attributes: dict[str, Any] = {
            "messaging.system": SYSTEM,
            "messaging.operation.type": "process",
            "messaging.destination.name": timer.type,
            "messaging.message.id": timer.key,
            "duetime.namespace": timer.namespace,
            "duetime.attempt": attempt,
            "duetime.lateness_ms": lateness.total_seconds() * 1000,
        }
        if timer.destination is not None:
            attributes["duetime.destination"] = timer.destination
        if timer.correlation_id is not None:
            attributes["messaging.message.conversation_id"] = timer.correlation_id
        return self.tracer.start_span(
            f"duetime process {timer.type}",
            context=context_from_text(timer.trace_context),
            kind=SpanKind.CONSUMER,
            attributes=attributes,
        )

    def context_for(self, span: Span) -> contextvars.Context:
        """A copy of the caller's context in which ``span`` is current: the context an
        attempt's task runs in, so the handler's own spans nest under it."""
        context = contextvars.copy_context()
        context.run(self._enter, span)
        return context

    def _enter(self, span: Span) -> None:
        """Make ``span`` current in this context (a task's own copy, never left)."""
        otel_context.attach(trace.set_span_in_context(span))
        ATTEMPT_TRACING.set(self)

    @contextmanager
    def entered(self, span: Span) -> Iterator[None]:
        """``span`` current in this task's context for a while (an attempt that starts in a
        task that was running already: a row held for its instant)."""
        token = otel_context.attach(trace.set_span_in_context(span))
        mine = ATTEMPT_TRACING.set(self)
        try:
            yield
        finally:
            ATTEMPT_TRACING.reset(mine)
            otel_context.detach(token)

    @staticmethod
    def failed(span: Span, error: BaseException) -> None:
        """Record a handler's exception on its attempt's span; an explicit outcome (Retry,
        Snooze, Dead...) is no exception to record: :meth:`end` says it. One that cannot be
        recorded (its ``str()`` fails) is left out: :meth:`end` still marks the span failed."""
        if not isinstance(error, HandlerOutcome):
            with suppress(Exception):
                span.record_exception(error)

    @staticmethod
    def end(span: Span, finish: Finish | None) -> None:
        """End an attempt's span with its outcome: one other than done is its
        ``duetime.outcome`` (retry, dead, expired and lost with status ERROR); None is done (a
        transactional handler's completion committed with its writes)."""
        if finish is not None and finish.outcome is not Outcome.DONE:
            span.set_attribute("duetime.outcome", finish.outcome.value)
            if finish.outcome in _FAILED:
                span.set_status(Status(StatusCode.ERROR, finish.error))
        span.end()

    # -- sending ----------------------------------------------------------------------------
    @contextmanager
    def sending(
        self, destination: str, type: str, message_id: str, headers: dict[str, str]
    ) -> Iterator[Span]:
        """The client span around one delivery; ``headers`` receives its propagation headers
        (``traceparent``, ``tracestate``: the global propagator's), to send with the message."""
        attributes = {
            "messaging.system": SYSTEM,
            "messaging.operation.type": "send",
            "messaging.destination.name": destination,
            "messaging.message.id": message_id,
            "duetime.type": type,
        }
        with self.tracer.start_as_current_span(
            f"duetime send {destination}", kind=SpanKind.CLIENT, attributes=attributes
        ) as span:
            propagate.inject(headers)
            yield span
