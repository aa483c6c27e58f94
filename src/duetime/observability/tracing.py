"""Whether this process traces, decided without importing OpenTelemetry unless it does.

``tracing`` (``DUETIME_TRACING``) is ``auto`` by default: on when the program has configured an
OpenTelemetry tracer provider before duetime opens (``opentelemetry.trace`` already imported and
its global provider no longer the API's placeholder), which is how instrumented libraries
behave; ``on`` traces with whatever provider is global (importing the API, which the ``otel``
extra installs); ``off`` never. When it is off, duetime holds ``None`` instead of a
:class:`~duetime.observability.otel.Tracing` and does no per-timer work for tracing at all.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from duetime.errors import InvalidInput

if TYPE_CHECKING:
    from duetime.observability.otel import Tracing

TRACING_MODES = ("auto", "on", "off")

_PLACEHOLDERS = ("ProxyTracerProvider", "NoOpTracerProvider")
"""The API's own providers: what ``get_tracer_provider`` gives before a program sets one."""


def check_tracing(mode: str) -> str:
    if mode not in TRACING_MODES:
        raise InvalidInput("tracing", f"must be one of {', '.join(TRACING_MODES)}, not {mode!r}")
    return mode


def tracing_for(mode: str, tracer_provider: object = None) -> Tracing | None:
    """The tracing this process does under ``mode`` (None: none); a ``tracer_provider`` given
    (an app's own, as instrumentations take one) turns ``auto`` on and is used instead of the
    global one."""
    if check_tracing(mode) == "off":
        return None
    if mode == "auto" and tracer_provider is None and not provider_configured():
        return None
    try:
        from duetime.observability.otel import Tracing
    except ImportError as exc:
        raise InvalidInput(
            "tracing", f"'on' needs OpenTelemetry: pip install 'duetime[otel]' ({exc})"
        ) from None
    return Tracing(tracer_provider)  # type: ignore[arg-type]


def provider_configured() -> bool:
    """A tracer provider other than the API's placeholder is set; never imports the API."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return False
    return type(trace.get_tracer_provider()).__name__ not in _PLACEHOLDERS
