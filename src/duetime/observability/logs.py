"""How duetime's processes log: text for people (the default) or one JSON object a line.

JSON lines carry ``timestamp``, ``level``, ``logger`` and ``message``, every field a call
passed in ``extra=`` (the worker passes ``namespace``, ``type``, ``key``, ``attempt`` and
``node`` about one timer), and the current OpenTelemetry ``trace_id``/``span_id`` when a span
is current. Both formats keep :class:`~duetime.support.escaping.EscapeControls`, so a message reads
the same in either and a value holding a newline never starts a line of its own.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter

from duetime.support.escaping import install_log_escaping

LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

_RENAMED = {"levelname": "level", "name": "logger"}
_NOT_FIELDS = [*RESERVED_ATTRS, "color_message", "taskName"]
"""Record attributes that are no caller's field (uvicorn adds ``color_message``)."""


class DuetimeJsonFormatter(JsonFormatter):
    """python-json-logger's formatter with duetime's field names and the trace, if any."""

    def __init__(self) -> None:
        super().__init__(
            "%(levelname)s %(name)s %(message)s",
            rename_fields=_RENAMED,
            reserved_attrs=_NOT_FIELDS,
            timestamp=True,
        )

    def add_fields(
        self, log_data: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]
    ) -> None:
        super().add_fields(log_data, record, message_dict)
        fields = dict(log_data)  # the timestamp first, where a reader's eye starts
        log_data.clear()
        log_data["timestamp"] = fields.pop("timestamp")
        log_data.update(fields)
        trace = _current_trace()
        if trace is not None:
            log_data.setdefault("trace_id", trace[0])
            log_data.setdefault("span_id", trace[1])


def formatter(log_format: str) -> logging.Formatter:
    """The formatter for ``text`` or ``json``."""
    if log_format == "json":
        return DuetimeJsonFormatter()
    if log_format == "text":
        return logging.Formatter(TEXT_FORMAT)
    raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}, not {log_format!r}")


def configure(level: str, log_format: str = "text") -> None:
    """Log at ``level`` to stderr in ``log_format``, with control characters escaped.

    Like :func:`logging.basicConfig`, it adds no handler when the root logger has one already
    (a program that set up its own logging keeps it), but it still escapes control characters.
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter(log_format))
    logging.basicConfig(level=getattr(logging, level.upper()), handlers=[handler])
    install_log_escaping()


def _current_trace() -> tuple[str, str] | None:
    """The current span's ids as hex, when OpenTelemetry is in use and a span is current.

    Looked up among the loaded modules, never imported: a process that traces (duetime's
    tracing, or the program's own) has loaded it already, and one that does not pays nothing."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return f"{context.trace_id:032x}", f"{context.span_id:016x}"
