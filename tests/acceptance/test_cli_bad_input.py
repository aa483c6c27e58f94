"""Bad input through the CLI: exit 2, the field named in the JSON error, nothing stored."""

from __future__ import annotations

from pathlib import Path

import pytest

from duetime import App

from .conftest import Cli

NY = ("--timezone", "America/New_York")
LATER = ("--delay", "60")


@pytest.fixture
def seeded(cli: Cli) -> Cli:
    """One timer already stored, so the database and namespace exist before the bad call."""
    with App(database_url=cli.db_url, namespace="default") as app:
        app.schedule("greet", delay=3600, key="seed")
    return cli


@pytest.mark.parametrize(
    ("args", "field", "code"),
    [
        pytest.param(["--at", "2025-03-15T09:00"], "at", "invalid_input", id="naive-at"),
        pytest.param(
            ["--local", "2025-03-15T09:00", "--timezone", "Mars/Olympus"],
            "timezone",
            "unknown_timezone",
            id="unknown-timezone",
        ),
        pytest.param(["--date", "2025-02-29"], "date", "invalid_input", id="nonexistent-date"),
        pytest.param(["--delay", "soon"], "delay", "invalid_input", id="bad-delay"),
        pytest.param(["--payload", "{nope", *LATER], "payload", "invalid_input", id="non-json"),
        pytest.param(["--key", "", *LATER], "key", "invalid_input", id="empty-key"),
        pytest.param(["--key", "k" * 300, *LATER], "key", "invalid_input", id="long-key"),
        pytest.param(
            ["--at", "2025-03-15T13:00:00Z", *LATER], "delay", "invalid_input", id="two-forms"
        ),
        pytest.param(
            ["--local", "2025-03-15T09:00", *NY, "--disambiguation", "latest"],
            "disambiguation",
            "invalid_input",
            id="bad-disambiguation",
        ),
        pytest.param(
            ["--max-attempts", "0", *LATER], "max_attempts", "invalid_input", id="zero-attempts"
        ),
        pytest.param([], "at", "invalid_input", id="no-when"),
        pytest.param(
            ["--local", "2025-03-15T09:00"], "timezone", "invalid_input", id="local-without-zone"
        ),
        pytest.param(
            ["--local", "2025-03-09T02:30", *NY, "--disambiguation", "reject"],
            "local",
            "nonexistent_local_time",
            id="rejected-gap",
        ),
        pytest.param(
            ["--on-conflict", "sometimes", *LATER], "on_conflict", "invalid_input", id="choice"
        ),
        pytest.param(
            ["--max-attempts", "many", *LATER], "max_attempts", "invalid_input", id="not-a-number"
        ),
        pytest.param(
            ["--expires-after", "1000000000000", *LATER],
            "expires_after",
            "invalid_input",
            id="expires-after-over-100-years",
        ),
        pytest.param(["--priority", "-1", *LATER], "priority", "invalid_input", id="priority-1"),
        pytest.param(["--priority", "10", *LATER], "priority", "invalid_input", id="priority-10"),
        pytest.param(
            ["--priority", "high", *LATER], "priority", "invalid_input", id="priority-high"
        ),
        pytest.param(["--delay", "P101Y"], "delay", "invalid_input", id="delay-over-100-years"),
        pytest.param(["--at", "9000-01-01T00:00:00Z"], "at", "invalid_input", id="at-past-9000"),
    ],
)
def test_schedule_rejects(seeded: Cli, args: list[str], field: str, code: str) -> None:
    error = seeded.fails("schedule", "greet", *args, code=2)
    assert error["field"] == field
    assert error["code"] == code
    assert error["message"]
    assert seeded.stored_keys() == ["seed"]


def test_a_day_that_does_not_exist_says_so(seeded: Cli) -> None:
    error = seeded.fails("schedule", "greet", "--at", "2025-02-29T09:00:00Z", code=2)
    assert error["field"] == "at"
    assert "does not exist" in error["message"]


def test_a_deeply_nested_payload_file_is_refused(seeded: Cli, tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    error = seeded.fails("schedule", "greet", "--payload", f"@{deep}", *LATER, code=2)
    assert error["field"] == "payload"
    assert "deeper than 64 levels" in error["message"]
    assert seeded.stored_keys() == ["seed"]


@pytest.mark.parametrize(
    ("option", "field"),
    [("--subject", "subject"), ("--key", "key"), ("--correlation-id", "correlation_id")],
)
def test_control_characters_in_identifiers_are_refused(
    seeded: Cli, option: str, field: str
) -> None:
    error = seeded.fails("schedule", "greet", option, "ada\n\x1b[2Jforged", *LATER, code=2)
    assert error["field"] == field
    assert seeded.stored_keys() == ["seed"]


def test_payload_over_the_configured_size(seeded: Cli) -> None:
    limit = {"DUETIME_MAX_PAYLOAD_BYTES": "100"}
    big = '{"text": "' + "x" * 200 + '"}'
    error = seeded.fails("schedule", "greet", "--payload", big, *LATER, env=limit, code=2)
    assert error["field"] == "payload"
    assert "100" in error["message"]
    assert seeded.stored_keys() == ["seed"]
    small = seeded.ok("schedule", "greet", "--payload", '{"text": "hi"}', *LATER, env=limit)
    assert small["action"] == "created"


def test_bad_event_type(seeded: Cli) -> None:
    error = seeded.fails("schedule", "no spaces allowed", *LATER, code=2)
    assert error["field"] == "type"
    assert seeded.stored_keys() == ["seed"]


def test_an_unknown_namespace_is_an_error_for_reads_and_writes(seeded: Cli) -> None:
    for command in (
        ["ls"],
        ["show", "seed"],
        ["cancel", "seed"],
        ["dead", "ls"],
        ["schedule", "greet", *LATER],
        ["emit", "greet"],
        ["schedules", "add", "daily", "greet", "--cron", "@daily"],
    ):
        error = seeded.fails(*command, "--namespace", "nope", code=3)
        assert (error["code"], error["field"]) == ("unknown_namespace", "namespace")
    assert "nope" not in seeded.ok("namespaces", "ls")["namespaces"]
    # a read never creates the namespace it was asked about
    assert seeded.fails("ls", code=3, env={"DUETIME_NAMESPACE": "nope"})["field"] == "namespace"


def test_invalid_namespace_name(seeded: Cli) -> None:
    error = seeded.fails("schedule", "greet", *LATER, "--namespace", "Bad Name!", code=2)
    assert error["field"] == "namespace"


def test_human_error_is_one_line_without_traceback(seeded: Cli) -> None:
    result = seeded("schedule", "greet", "--date", "2025-03-15", "--timezone", "Mars/Olympus")
    assert result.code == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error [unknown_timezone] timezone: unknown IANA timezone")
    assert seeded.stored_keys() == ["seed"]


def test_usage_errors_are_exit_2(seeded: Cli) -> None:
    missing = seeded("schedule")
    assert missing.code == 2
    assert missing.stderr.startswith("error [usage] ")
    assert seeded("no-such-command").code == 2
    error = seeded.fails("ls", "--limit", "0", code=2)
    assert error["field"] == "limit"


DEEP = "[" * 30_000 + "]" * 30_000
"""Deeper than Python's parser recurses."""


def _nested(levels: int) -> str:
    """Arrays nested ``levels`` deep."""
    return "[" * levels + "]" * levels


@pytest.mark.parametrize("depth", ["parser", "rule"])
def test_a_deep_from_file_line_is_refused_like_a_deep_payload(
    seeded: Cli, tmp_path: Path, depth: str
) -> None:
    payload = DEEP if depth == "parser" else _nested(65)  # one level past the payload's rule
    line = '{"type": "greet", "delay": "P1D", "key": "deep", "payload": ' + payload + "}"
    error = seeded.fails("schedule", "--from-file", "-", input=f"{line}\n", code=2)
    assert error["field"].startswith("line 1"), error
    assert "deeper than" in error["message"]
    assert seeded.stored_keys() == ["seed"]


def test_a_from_file_line_may_carry_a_payload_of_the_full_depth(seeded: Cli) -> None:
    line = '{"type": "greet", "delay": "P1D", "key": "deep64", "payload": ' + _nested(64) + "}"
    seeded.ok("schedule", "--from-file", "-", input=f"{line}\n")
    assert "deep64" in seeded.stored_keys()


@pytest.mark.parametrize("document", [DEEP, '{"routes": ' + _nested(70) + "}"])
def test_deep_routes_are_refused_naming_routes(cli: Cli, tmp_path: Path, document: str) -> None:
    routes = tmp_path / "routes.json"
    routes.write_text(document)
    inline = [document] if document.startswith("{") else []  # --routes '{…}' is the JSON
    for value in (str(routes), *inline):
        error = cli.fails("tick", "--routes", value, code=2)
        assert error["field"] == "routes"
        assert "deeper than 64 levels" in error["message"]


@pytest.mark.parametrize("document", [DEEP, _nested(70)])
def test_deep_sources_are_refused_naming_sources(
    cli: Cli, app_module: str, tmp_path: Path, document: str
) -> None:
    sources = tmp_path / "sources.json"
    sources.write_text(document)
    error = cli.fails("worker", "--app", app_module, "--sources", str(sources), code=2)
    assert error["field"] == "sources"
    assert "deeper than 64 levels" in error["message"]
    env = {"DUETIME_SOURCES": document}
    env_error = cli.fails("worker", "--app", app_module, code=2, env=env)
    assert env_error["field"] == "sources"
