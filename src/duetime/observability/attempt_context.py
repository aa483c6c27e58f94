"""The tracing of the attempt running in this context, for the destinations it delivers to.

Kept apart from :mod:`duetime.observability.otel` (which imports OpenTelemetry) so that a
destination can look it up with nothing imported when tracing is off, and apart from
:mod:`duetime.observability.tracing` (which builds the tracing) so that neither of those two
needs the other to set or read it.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from contextvars import ContextVar
from typing import Protocol


class SendTracing(Protocol):
    """What a delivery asks of the attempt's tracing: a client span around the send."""

    def sending(
        self, destination: str, type: str, message_id: str, headers: dict[str, str]
    ) -> AbstractContextManager[object]:
        """The span around one delivery; ``headers`` receives its propagation headers."""
        ...


ATTEMPT_TRACING: ContextVar[SendTracing | None] = ContextVar(
    "duetime_attempt_tracing", default=None
)
"""Set inside an attempt's process span only: a destination reads it to open its client span
and send the trace on, and finds None (one lookup, nothing imported) when tracing is off."""
