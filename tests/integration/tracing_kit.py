"""OpenTelemetry for the tracing tests: an SDK provider of a test's own, exporting to memory.

Each test passes its provider to the app (``AsyncApp(tracer_provider=...)``), so no test sets
the process's global provider and the other tests run untraced, as they always have.
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


class Traced:
    """A tracer provider whose finished spans are kept in memory, found by name."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("tests")

    @property
    def spans(self) -> Sequence[ReadableSpan]:
        return self.exporter.get_finished_spans()

    def named(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.spans if span.name == name]

    def one(self, name: str) -> ReadableSpan:
        found = self.named(name)
        assert len(found) == 1, f"{name!r}: {len(found)} spans in {[s.name for s in self.spans]}"
        return found[0]


def traceparent(span: ReadableSpan) -> str:
    """The W3C traceparent naming ``span``, with its flags."""
    context = span.get_span_context()
    assert context is not None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"


def is_child(child: ReadableSpan, parent: ReadableSpan) -> bool:
    """``child``'s parent is ``parent``, in the same trace."""
    mine, theirs = child.get_span_context(), parent.get_span_context()
    assert mine is not None
    assert theirs is not None
    return (
        child.parent is not None
        and child.parent.span_id == theirs.span_id
        and mine.trace_id == theirs.trace_id
    )
