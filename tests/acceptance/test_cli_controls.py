"""Text from a handler or a caller never drives the terminal: every output path escapes it,
and every identifier refuses the same control characters.
"""

from __future__ import annotations

import json

import pytest

from .conftest import Cli

HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x9b31m\x85\u2028\x7fend"
"""An OSC title, a screen clear, C1 CSI and NEL, a line separator, DEL."""
RAW = ("\x1b", "\x07", "\x9b", "\x85", "\u2028", "\x7f")

HOSTILE_APP = f"""
from duetime import App

app = App()


@app.handler("hostile")
def hostile(event):
    raise ValueError({HOSTILE!r})
"""


def strings(value: object) -> list[str]:
    """Every string inside a JSON value."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return [text for item in value for text in strings(item)]
    return []


def no_raw_controls(text: str) -> None:
    for char in RAW:
        assert char not in text, f"{char!r} reached the terminal raw"


@pytest.fixture
def failed(cli: Cli) -> Cli:
    """A timer whose only attempt failed with a hostile exception message."""
    (cli.cwd / "hostile_app.py").write_text(HOSTILE_APP)
    cli.ok("schedule", "hostile", "--key", "h1", "--delay", "0", "--max-attempts", "1")
    assert cli.ok("tick", "--app", "hostile_app:app")["outcomes"] == {"dead": 1}
    return cli


def test_show_escapes_the_traceback_and_the_error(failed: Cli) -> None:
    shown = failed("show", "h1")
    assert shown.code == 0, shown.stderr
    no_raw_controls(shown.stdout)
    assert "traceback of attempt 1" in shown.stdout
    assert "\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m\\x85\\u2028\\x7fend" in shown.stdout
    assert shown.stdout.count("\n") > 5, "the traceback keeps its lines"


def test_json_output_escapes_what_json_leaves_raw_and_keeps_the_value(failed: Cli) -> None:
    for args in (("show", "h1", "--json"), ("dead", "ls", "--json"), ("ls", "--json")):
        result = failed(*args)
        assert result.code == 0, result.stderr
        no_raw_controls(result.stdout)
        assert any(HOSTILE in text for text in strings(result.json())), args


@pytest.mark.parametrize("name", ["ops\x85", "ops\x9b31m", "ops\x7f", "ops\u2028x", "a\tb"])
def test_token_names_refuse_what_every_identifier_refuses(cli: Cli, name: str) -> None:
    error = cli.fails("tokens", "create", "--namespace", "default", "--name", name, code=2)
    assert error["field"] == "name"
    assert "control characters" in error["message"]
    subject = cli.fails("schedule", "x", "--delay", "60", "--subject", name, code=2)
    assert subject["field"] == "subject"
    assert cli.ok("tokens", "ls")["items"] == []


BIDI = ("\u202e", "\u202d", "\u2066", "\u2067", "\u2068", "\u2069", "\u200e", "\u200f", "\u061c")
"""Unicode's bidirectional formatting: U+202E shows ``invoice\u202eexe.pdf`` reversed."""


def test_bidi_controls_are_escaped_like_the_other_controls(cli: Cli) -> None:
    """A subject and a payload holding every bidirectional control: the tables, ``show`` and
    ``--json`` write each as an escape, and the JSON still parses to the stored text."""
    subject = "invoice\u202eexe.pdf"
    note = "".join(BIDI)
    payload = json.dumps({"note": note})  # ASCII: the controls as \u escapes
    cli.ok(
        "schedule",
        "bidi",
        "--key",
        "b1",
        "--delay",
        "3600",
        "--subject",
        subject,
        "--payload",
        payload,
    )
    for args in (("ls",), ("show", "b1"), ("ls", "--json"), ("show", "b1", "--json")):
        shown = cli(*args)
        assert shown.code == 0, shown.stderr
        for char in BIDI:
            assert char not in shown.stdout, f"{char!r} reached the terminal raw in {args}"
        assert "\\u202e" in shown.stdout, args
    assert cli.ok("show", "b1")["timer"]["subject"] == subject
    assert any(note in text for text in strings(cli.ok("show", "b1")))
