"""Log lines as text or as one JSON object a line."""

from __future__ import annotations

import io
import json
import logging
from typing import Any

import pytest

from duetime.observability.logs import formatter
from duetime.support.escaping import install_log_escaping


def _logged(log_format: str, message: str, *args: object, **kwargs: Any) -> str:
    stream = io.StringIO()
    logger = logging.getLogger("duetime.test_logs")
    logger.propagate = False
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter(log_format))
    logger.addHandler(handler)
    install_log_escaping(logger)
    try:
        logger.warning(message, *args, **kwargs)
    finally:
        logger.removeHandler(handler)
    return stream.getvalue()


def test_a_json_line_carries_the_timer_it_is_about() -> None:
    extra = {"namespace": "shop", "type": "t", "key": "k1", "attempt": 2, "node": "n-1"}
    line = _logged("json", "handler for %s failed: %s", "t", "boom", extra=extra)
    assert line.count("\n") == 1
    record = json.loads(line)
    assert next(iter(record)) == "timestamp"
    assert record["timestamp"].endswith("+00:00")
    assert {k: v for k, v in record.items() if k != "timestamp"} == {
        "level": "WARNING",
        "logger": "duetime.test_logs",
        "message": "handler for t failed: boom",
        **extra,
    }


def test_a_json_line_escapes_control_characters_as_a_text_line_does() -> None:
    error = "boom\nERROR forged"
    text = _logged("text", "failed: %s", error)
    record = json.loads(_logged("json", "failed: %s", error))
    assert record["message"] == "failed: boom\\nERROR forged"
    assert text.endswith("failed: boom\\nERROR forged\n")


def test_a_json_line_keeps_the_traceback_in_one_field() -> None:
    try:
        raise KeyError("missing")
    except KeyError:
        line = _logged("json", "oops", exc_info=True)
    assert line.count("\n") == 1
    trace = json.loads(line)["exc_info"]
    assert trace.startswith("Traceback (most recent call last):")
    assert trace.endswith("KeyError: 'missing'")


def test_a_json_line_names_the_current_trace() -> None:
    trace = pytest.importorskip("opentelemetry.trace")
    context = trace.SpanContext(trace_id=0xABC, span_id=0x12, is_remote=False)
    with trace.use_span(trace.NonRecordingSpan(context)):
        record = json.loads(_logged("json", "inside"))
    assert record["trace_id"] == f"{0xABC:032x}"
    assert record["span_id"] == f"{0x12:016x}"
    assert "trace_id" not in json.loads(_logged("json", "outside"))


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="text, json"):
        formatter("yaml")


def _uvicorn_access(args: tuple[object, ...]) -> tuple[str, str]:
    """What uvicorn's own access formatter writes for ``args``, and logging's stderr."""
    from uvicorn.logging import AccessFormatter

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(AccessFormatter('%(client_addr)s - "%(request_line)s" %(status_code)s'))
    logger = logging.getLogger("test.uvicorn.access")
    logger.handlers, logger.propagate = [handler], False
    logger.setLevel(logging.INFO)
    install_log_escaping(logger)
    errors = io.StringIO()
    raising, logging.raiseExceptions = logging.raiseExceptions, True
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("sys.stderr", errors)
            logger.info('%s - "%s %s HTTP/%s" %d', *args)
    finally:
        logging.raiseExceptions = raising
        logger.handlers = []
    return stream.getvalue(), errors.getvalue()


def test_uvicorns_access_lines_survive_the_escaping() -> None:
    """Its formatter reads the fields from ``record.args``: the filter must leave them there."""
    line, errors = _uvicorn_access(("127.0.0.1:5000", "GET", "/healthz", "1.1", 200))
    assert errors == ""
    assert line == '127.0.0.1:5000 - "GET /healthz HTTP/1.1" 200 OK\n'
    line, errors = _uvicorn_access(("127.0.0.1:5000", "GET", "/a\x1b[31m\nb", "1.1", 404))
    assert errors == ""
    assert line == '127.0.0.1:5000 - "GET /a\\x1b[31m\\nb HTTP/1.1" 404 Not Found\n'


def test_a_logged_traceback_keeps_its_lines_but_not_its_escape_sequences() -> None:
    try:
        raise ValueError("\x1b]0;pwned\x07\x1b[2J\x9b31m\u2028end")
    except ValueError:
        text = _logged("text", "handler failed", exc_info=True)
    for raw in ("\x1b", "\x9b", "\u2028"):
        assert raw not in text
    assert "ValueError: \\x1b]0;pwned\\x07\\x1b[2J\\x9b31m\\u2028end" in text
    assert text.count("\n") >= 4
    assert "\nTraceback (most recent call last):\n" in text
