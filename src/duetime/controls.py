"""Control characters made visible, so stored text can never drive a terminal or forge a log line.

Identifiers (type, subject, key, namespace, correlation id…) refuse control characters when
they are written; free text (a handler's error, a payload shown in a table) may hold any, so
what duetime prints and logs shows them escaped: a newline in an error becomes ``\\n`` and
stays on its line.
"""

from __future__ import annotations

import logging
import re

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

    The message is formatted once here (template and values) and escaped, so a value holding a
    newline cannot start a line that looks like another record. Tracebacks are left alone: they
    are formatted later, from ``exc_info``, and are many lines by nature.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        escaped = escape_controls(message)
        if escaped is not message or record.args:
            record.msg, record.args = escaped, None
        return True


def install_log_escaping(logger: logging.Logger | None = None) -> None:
    """Add :class:`EscapeControls` to every handler of ``logger`` (the root by default)."""
    target = logger if logger is not None else logging.getLogger()
    for handler in target.handlers:
        if not any(isinstance(f, EscapeControls) for f in handler.filters):
            handler.addFilter(EscapeControls())
