"""Control characters made visible, so stored text can never drive a terminal or forge a log line.

Identifiers (type, subject, key, namespace, correlation id, token and source names…) refuse
:data:`IDENTIFIER_CONTROL` when they are written (``validation.check_identifier_text``); free
text (a handler's error and traceback, a payload shown in a table) may hold any, so whatever
duetime prints and logs goes through :func:`escape_controls` (or :func:`escape_json_controls`
for JSON documents): a newline in an error becomes ``\\n`` and stays on its line, an escape
sequence in a handler's exception message is shown, never obeyed.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping

BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
"""Unicode's bidirectional formatting characters (marks, embeddings, overrides, isolates), as
a regex class body: printed raw, U+202E turns the rest of a line around, so ``txt.exe`` can
show as ``exe.txt`` and a forged value reads as another (Trojan Source)."""
CONTROL = re.compile(rf"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029{BIDI}]")
"""C0 (except tab), DEL, C1, Unicode's line and paragraph separators and its bidirectional
formatting characters: escaped on output."""
IDENTIFIER_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
"""C0, DEL, C1 and the separators (tab included): refused in every identifier, which terminals
show in columns. The bidirectional characters are escaped on output rather than refused."""
_LINES = re.compile(rf"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029{BIDI}]")
""":data:`CONTROL` but the newline: for text that is many lines by nature (a traceback)."""
_JSON_RAW = re.compile(rf"[\x7f-\x9f\u2028\u2029{BIDI}]")
"""What JSON leaves unescaped of :data:`CONTROL` (it escapes C0 itself)."""
_NAMED = {"\n": "\\n", "\r": "\\r"}


def has_controls(text: str) -> bool:
    return CONTROL.search(text) is not None


def escape_controls(text: str, *, keep_lines: bool = False) -> str:
    """``text`` with every control character written as an escape (``\\n``, ``\\x1b``); with
    ``keep_lines`` newlines stay (a traceback keeps its lines, never its escape sequences)."""
    pattern = _LINES if keep_lines else CONTROL
    if pattern.search(text) is None:
        return text
    return pattern.sub(_escape, text)


def escape_json_controls(text: str) -> str:
    """A JSON document's text with the control characters JSON leaves raw (DEL, C1, U+2028,
    U+2029) written as ``\\u`` escapes: the same document, safe to print on a terminal."""
    if _JSON_RAW.search(text) is None:
        return text
    return _JSON_RAW.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


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
    A traceback keeps its lines, but not its escape sequences (an exception's message is a
    handler's text): it is formatted here, escaped, as the text every formatter then prints.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and not record.exc_text:
            traceback = _TRACEBACKS.formatException(record.exc_info)
            record.exc_text = escape_controls(traceback, keep_lines=True)
        if record.stack_info:
            record.stack_info = escape_controls(record.stack_info, keep_lines=True)
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


_TRACEBACKS = logging.Formatter()


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
