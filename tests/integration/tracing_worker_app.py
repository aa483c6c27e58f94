"""The app module of the cross-process tracing test (run by ``duetime worker --app``).

It sets up OpenTelemetry as a program would, before duetime opens: a global SDK provider whose
spans go, one JSON line each, to the file ``DUETIME_TEST_SPANS`` names. duetime's default
(``tracing=auto``) then traces with it. ``greet``'s handler opens a span of its own;
``fragile``'s fails (its log line carries the trace id).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from duetime import App, Event


class JsonLinesExporter(SpanExporter):
    """Appends each finished span to a file as one JSON object a line."""

    def __init__(self, path: str) -> None:
        self.path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with open(self.path, "a") as out:
            for span in spans:
                context = span.get_span_context()
                assert context is not None
                line = {
                    "name": span.name,
                    "kind": span.kind.name,
                    "trace_id": f"{context.trace_id:032x}",
                    "span_id": f"{context.span_id:016x}",
                    "parent_id": None if span.parent is None else f"{span.parent.span_id:016x}",
                    "attributes": dict(span.attributes or {}),
                }
                out.write(json.dumps(line) + "\n")
        return SpanExportResult.SUCCESS


provider = TracerProvider()
provider.add_span_processor(
    SimpleSpanProcessor(JsonLinesExporter(os.environ["DUETIME_TEST_SPANS"]))
)
trace.set_tracer_provider(provider)

app = App()


@app.handler("greet")
def greet(event: Event) -> None:
    with trace.get_tracer("user-code").start_as_current_span("greeting"):
        pass


@app.handler("fragile")
async def fragile(event: Event) -> None:
    raise RuntimeError("the printer is on fire")
