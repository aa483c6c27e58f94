"""Control characters made visible, so stored text can never drive a terminal or forge a log line.

Identifiers (type, subject, key, namespace, correlation id…) refuse control characters when
they are written; free text (a handler's error, a payload shown in a table) may hold any, so
what duetime prints and logs shows them escaped: a newline in an error becomes ``\\n`` and
stays on its line.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping

CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")
"""C0 (except tab), DEL, C1, and Unicode's line and paragraph separators."""
_NAMED = {"\n": "\\n", "\r": "\\r"}


def has_controls(text: str) -> bool:
    return CONTROL.search(text) is not None


def escape_controls(text: str) -> str:
    """``text`` with every control character written as an escape (``\\n``, ``\\x1b``)."""
    if CONTROL.search(text) is None:
        return text
    return CONTROL.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


class EscapeControls(logging.Filter):
    """A logging filter that escapes control characters in each record's message.

    A value holding a newline cannot start a line that looks like another record. A record
    whose message has none is left exactly as it is; otherwise its text arguments are escaped
    in place, so formatters that read ``record.args`` themselves (uvicorn's access log takes
    its fields from them) still find them; only a message whose escaped arguments still
    format to control characters (an object's own text) is formatted here once and escaped.
    Tracebacks are left alone: they are formatted later, from ``exc_info``, and are many
    lines by nature.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if not has_controls(record.getMessage()):
            return True
        if isinstance(record.msg, str):
            record.msg = escape_controls(record.msg)
        args = record.args
        if isinstance(args, tuple):
            record.args = tuple(_escaped_arg(arg) for arg in args)
        elif isinstance(args, Mapping):
            record.args = {name: _escaped_arg(arg) for name, arg in args.items()}
        try:
            settled = not has_controls(record.getMessage())
        except (TypeError, ValueError):  # an argument's type changed under its placeholder
            settled = False
        if not settled:
            record.msg, record.args = escape_controls(_formatted(record)), ()
        return True


def _escaped_arg(arg: object) -> object:
    """A logging argument with its control characters escaped; a number, or an object whose
    text has none, unchanged."""
    if isinstance(arg, str):
        return escape_controls(arg)
    if isinstance(arg, int | float) or not has_controls(str(arg)):
        return arg
    return escape_controls(str(arg))


def _formatted(record: logging.LogRecord) -> str:
    try:
        return record.getMessage()
    except (TypeError, ValueError):
        return str(record.msg)


def install_log_escaping(logger: logging.Logger | None = None) -> None:
    """Add :class:`EscapeControls` to every handler of ``logger`` (the root by default)."""
    target = logger if logger is not None else logging.getLogger()
    for handler in target.handlers:
        if not any(isinstance(f, EscapeControls) for f in handler.filters):
            handler.addFilter(EscapeControls())
