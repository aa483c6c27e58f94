"""Control characters are shown escaped in what duetime prints and logs."""

from __future__ import annotations

import io
import logging

import pytest
from rich.console import Console
from rich.table import Table

from duetime.cli import output
from duetime.support.escaping import EscapeControls, escape_controls, install_log_escaping


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain", "plain"),
        ("a\nb", "a\\nb"),
        ("a\r\nb", "a\\r\\nb"),
        ("\x1b[2J", "\\x1b[2J"),
        ("c1\x9b", "c1\\x9b"),
        ("line\u2028sep", "line\\u2028sep"),
        ("tab\tkept", "tab\tkept"),
        ("zoë ✓", "zoë ✓"),
    ],
)
def test_escape_controls(text: str, shown: str) -> None:
    assert escape_controls(text) == shown


def _logged(message: str, *args: object) -> str:
    stream = io.StringIO()
    logger = logging.getLogger("duetime.test_controls")
    logger.propagate = False
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logger.addHandler(handler)
    install_log_escaping(logger)
    install_log_escaping(logger)  # twice: one filter
    try:
        assert sum(isinstance(f, EscapeControls) for f in handler.filters) == 1
        logger.warning(message, *args)
    finally:
        logger.removeHandler(handler)
    return stream.getvalue()


def test_a_newline_in_a_logged_value_cannot_forge_a_line() -> None:
    error = "boom\nERROR handler for admin failed: forged"
    text = _logged("handler for %s (key %s) failed: %s", "t", "k", error)
    assert text.count("\n") == 1
    assert (
        text
        == "WARNING handler for t (key k) failed: boom\\nERROR handler for admin failed: forged\n"
    )


def test_a_logged_exception_keeps_its_traceback_lines() -> None:
    stream = io.StringIO()
    logger = logging.getLogger("duetime.test_controls.tb")
    logger.propagate = False
    handler = logging.StreamHandler(stream)
    logger.addHandler(handler)
    install_log_escaping(logger)
    try:
        raise ValueError("bad\nvalue")
    except ValueError:
        logger.exception("failed: %s", "x\ny")
    finally:
        logger.removeHandler(handler)
    first, *rest = stream.getvalue().splitlines()
    assert first == "failed: x\\ny"
    assert rest[0].startswith("Traceback")


def test_tables_show_stored_text_escaped_and_markup_inert() -> None:
    table = Table()
    table.add_column("subject")
    table.add_column("error")
    output.add_row(table, "[red]user[/]\x1b[31m", "line one\nline two")
    console = Console(file=io.StringIO(), width=120, color_system=None)
    console.print(table)
    printed = console.file.getvalue()  # type: ignore[attr-defined]
    assert "[red]user[/]\\x1b[31m" in printed
    assert "line one\\nline two" in printed
    assert "\x1b" not in printed


def test_error_lines_are_one_line() -> None:
    assert output.error_line("invalid_input", "x\ny", "at") == "error [invalid_input] at: x\\ny"
