"""The ``duetime`` CLI end to end: the real console script on a real SQLite file."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from duetime import App

from .conftest import Cli


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text)


def test_version(real_cli: Cli) -> None:
    """The installed console script itself (the other tests run the same entry point in this
    process): its version, and every command in its help."""
    cli = real_cli
    result = cli("--version")
    assert result.code == 0
    assert result.stdout.startswith("duetime 0.1.0 (tzdata ")
    usage = cli("--help")
    assert usage.code == 0
    for command in ("schedule", "emit", "ls", "show", "cancel", "dead", "worker", "tick", "nodes"):
        assert f"  {command} " in usage.stdout


def test_version_json_is_json_wherever_the_flag_stands(cli: Cli) -> None:
    for args in (("--version", "--json"), ("--json", "--version")):
        result = cli(*args)
        assert result.code == 0, result.stderr
        document = result.json()
        assert document["version"] == "0.1.0"
        assert document["tzdata"]
    assert cli().code == 2  # no command: a usage error, as before


@pytest.mark.parametrize(
    ("when", "due_at"),
    [
        (["--at", "2025-03-15T13:00:00Z"], "2025-03-15T13:00:00Z"),
        (["--at", "2025-03-15T09:00:00-04:00"], "2025-03-15T13:00:00Z"),
        # DST began on 2025-03-09: 09:00 New York is 13:00 UTC, not 14:00.
        (["--local", "2025-03-15T09:00", "--timezone", "America/New_York"], "2025-03-15T13:00:00Z"),
        # In the spring-forward gap: read with the offset before the gap (03:30 EDT).
        (["--local", "2025-03-09T02:30", "--timezone", "America/New_York"], "2025-03-09T07:30:00Z"),
        # In the fall-back overlap: the earlier instant by default, the later one on request.
        (["--local", "2025-11-02T01:30", "--timezone", "America/New_York"], "2025-11-02T05:30:00Z"),
        (
            [
                *("--local", "2025-11-02T01:30", "--timezone", "America/New_York"),
                *("--disambiguation", "later"),
            ],
            "2025-11-02T06:30:00Z",
        ),
        (["--date", "2025-03-15"], "2025-03-15T00:00:00Z"),
        (["--date", "2025-03-15", "--timezone", "Asia/Tokyo"], "2025-03-14T15:00:00Z"),
    ],
)
def test_schedule_each_when_form(cli: Cli, when: list[str], due_at: str) -> None:
    answer = cli.ok("schedule", "greet", *when, "--key", "k1")
    assert answer["action"] == "created"
    assert answer["timer"]["key"] == "k1"
    assert answer["timer"]["due_at"] == due_at
    assert answer["timer"]["status"] == "scheduled"


def test_schedule_with_a_delay_is_relative_to_now(cli: Cli) -> None:
    before = datetime.now(UTC)
    timer = cli.ok("schedule", "greet", "--delay", "PT90S")["timer"]
    after = datetime.now(UTC)
    due_at = _instant(timer["due_at"])
    assert before + timedelta(seconds=90) <= due_at <= after + timedelta(seconds=90)
    assert len(timer["key"]) >= 16  # generated
    plain = cli.ok("schedule", "greet", "--delay", "60")["timer"]
    gap = _instant(plain["due_at"]) - _instant(plain["registered_at"])
    assert timedelta(seconds=59) < gap < timedelta(seconds=61)


def test_schedule_stores_every_field(cli: Cli) -> None:
    timer = cli.ok(
        *("schedule", "birthday.greeting", "--local", "2025-03-15T09:00"),
        *("--timezone", "America/New_York", "--payload", '{"name": "Ada", "n": [1, 2]}'),
        *("--key", "bday:ada:2025", "--subject", "user-1", "--correlation-id", "c-9"),
        *("--max-attempts", "3", "--expires-after", "PT1H"),
    )["timer"]
    assert timer["type"] == "birthday.greeting"
    assert timer["payload"] == {"name": "Ada", "n": [1, 2]}
    assert timer["subject"] == "user-1"
    assert timer["correlation_id"] == "c-9"
    assert timer["max_attempts"] == 3
    assert timer["expires_after"] == 3600
    assert timer["local"] == "2025-03-15T09:00:00"
    assert timer["timezone"] == "America/New_York"


def test_schedule_payload_from_a_file(cli: Cli) -> None:
    (cli.cwd / "payload.json").write_text('{"from": "file"}')
    timer = cli.ok("schedule", "greet", "--delay", "60", "--payload", "@payload.json")["timer"]
    assert timer["payload"] == {"from": "file"}


def test_schedule_human_output_names_action_key_and_local_time(cli: Cli) -> None:
    result = cli(
        *("schedule", "greet", "--local", "2025-03-15T09:00", "--timezone", "America/New_York"),
        *("--key", "k1"),
    )
    assert result.code == 0, result.stderr
    assert "created" in result.stdout
    assert "k1" in result.stdout
    assert "2025-03-15T13:00:00Z" in result.stdout
    assert "America/New_York" in result.stdout


def test_on_conflict_update_keep_error(cli: Cli) -> None:
    at = ("--at", "2025-03-15T13:00:00Z", "--key", "k")
    assert cli.ok("schedule", "greet", *at, "--payload", "1")["action"] == "created"
    updated = cli.ok("schedule", "greet", *at, "--payload", "2")
    assert (updated["action"], updated["timer"]["payload"]) == ("updated", 2)
    kept = cli.ok("schedule", "greet", *at, "--payload", "3", "--on-conflict", "keep")
    assert (kept["action"], kept["timer"]["payload"]) == ("kept", 2)
    error = cli.fails("schedule", "greet", *at, "--on-conflict", "error", code=4)
    assert error["code"] == "already_exists"


def test_emit_is_due_now_and_keeps_an_existing_key(cli: Cli) -> None:
    before = datetime.now(UTC)
    first = cli.ok("emit", "user.signed_up", "--payload", '{"id": 7}', "--key", "e1")
    assert first["action"] == "created"
    assert before - timedelta(seconds=1) <= _instant(first["timer"]["due_at"]) <= datetime.now(UTC)
    again = cli.ok("emit", "user.signed_up", "--payload", '{"id": 8}', "--key", "e1")
    assert again["action"] == "kept"
    assert again["timer"]["payload"] == {"id": 7}


def test_priority_round_trips_through_schedule_emit_and_show(cli: Cli) -> None:
    at = ("--at", "2025-03-15T13:00:00Z")
    urgent = cli.ok("schedule", "greet", *at, "--key", "p", "--priority", "8")["timer"]
    assert urgent["priority"] == 8
    assert cli.ok("show", "p")["timer"]["priority"] == 8
    assert "priority" in cli("show", "p").stdout
    normal = cli.ok("schedule", "greet", *at, "--key", "n")["timer"]
    assert normal["priority"] == 0
    assert "priority" not in cli("show", "n").stdout  # the default is not shown
    emitted = cli.ok("emit", "user.signed_up", "--key", "e", "--priority", "9")
    assert emitted["timer"]["priority"] == 9


def _seed(cli: Cli) -> None:
    lines = [
        {"type": "greet", "at": "2025-03-15T13:00:00Z", "key": "a", "subject": "u1"},
        {"type": "greet", "at": "2025-03-16T13:00:00Z", "key": "b", "subject": "u2"},
        {"type": "remind", "at": "2025-03-17T13:00:00Z", "key": "c", "subject": "u1"},
        {"type": "remind", "at": "2025-03-18T13:00:00Z", "key": "d", "subject": "u1"},
    ]
    text = "".join(json.dumps(line) + "\n" for line in lines)
    assert cli.ok("schedule", "--from-file", "-", input=text)["created"] == 4


def test_ls_newest_first_with_filters_and_pages(cli: Cli) -> None:
    _seed(cli)
    cli.ok("cancel", "c")

    def keys(*args: str) -> list[str]:
        return [t["key"] for t in cli.ok("ls", *args)["items"]]

    assert keys() == ["d", "c", "b", "a"]
    assert keys("--subject", "u1") == ["d", "c", "a"]
    assert keys("--type", "remind") == ["d", "c"]
    assert keys("--status", "cancelled") == ["c"]
    assert keys("--subject", "u1", "--status", "scheduled", "--type", "greet") == ["a"]
    assert keys("--type", "re*") == ["d", "c"]
    window = ("--due-from", "2025-03-16T13:00:00Z", "--due-until", "2025-03-18T13:00:00Z")
    assert keys(*window) == ["c", "b"]

    first = cli.ok("ls", "--limit", "3")
    assert [t["key"] for t in first["items"]] == ["d", "c", "b"]
    assert first["next_cursor"]
    rest = cli.ok("ls", "--limit", "3", "--cursor", first["next_cursor"])
    assert [t["key"] for t in rest["items"]] == ["a"]
    assert rest["next_cursor"] is None


def test_ls_human_table_and_next_cursor_hint(real_cli: Cli) -> None:
    """The real command's table when its output is a pipe, not a terminal."""
    cli = real_cli
    _seed(cli)
    result = cli("ls", "--limit", "2")
    assert result.code == 0, result.stderr
    # piped: plain columns, no box drawing
    assert not set(result.stdout) & set("│┃━─┏┡└")
    rows = [line.split() for line in result.stdout.splitlines()]
    assert rows[0][:2] == ["key", "type"]
    assert ["d", "remind", "u1", "scheduled", "2025-03-18T13:00:00Z", "0/20"] in rows
    assert ["c", "remind", "u1", "scheduled", "2025-03-17T13:00:00Z", "0/20"] in rows
    assert "--cursor" in result.stdout
    assert "a" not in [row[0] for row in rows if row]


def test_ls_bad_status_names_the_field(cli: Cli) -> None:
    _seed(cli)
    error = cli.fails("ls", "--status", "sleeping", code=2)
    assert error["field"] == "status"
    assert cli.fails("ls", "--due-until", "soon", code=2)["field"] == "due_until"


def test_show_prints_the_timer_and_its_attempts(cli: Cli) -> None:
    _seed(cli)
    shown = cli.ok("show", "b")
    assert shown["timer"]["key"] == "b"
    assert shown["timer"]["subject"] == "u2"
    assert shown["attempts"] == []
    human = cli("show", "b")
    assert human.code == 0
    assert "2025-03-16T13:00:00Z" in human.stdout
    missing = cli.fails("show", "nope", code=3)
    assert (missing["code"], missing["field"]) == ("not_found", "key")


def test_cancel_then_cancel_again_is_a_conflict(real_cli: Cli) -> None:
    """The real command's exit codes and its one-line errors, as a shell sees them."""
    cli = real_cli
    cli.ok("schedule", "greet", "--delay", "3600", "--key", "k1")
    cancelled = cli.ok("cancel", "k1")
    assert cancelled["timer"]["status"] == "cancelled"
    again = cli("cancel", "k1")
    assert again.code == 4
    assert again.stderr.startswith("error [conflict] key: ")
    assert "Traceback" not in again.stderr
    assert cli.fails("cancel", "k1", code=4)["code"] == "conflict"
    assert cli.fails("cancel", "unknown", code=3)["code"] == "not_found"


def test_from_file_stores_every_line(cli: Cli) -> None:
    lines = [
        '{"type": "greet", "at": "2025-03-15T13:00:00Z", "key": "f1"}',
        "",
        '{"type": "greet", "local": "2025-03-15T09:00", "timezone": "America/New_York",'
        ' "key": "f2", "payload": {"x": 1}}',
        '{"type": "greet", "date": "2025-03-15", "timezone": "Asia/Tokyo", "key": "f3"}',
    ]
    (cli.cwd / "timers.jsonl").write_text("\n".join(lines) + "\n")
    counts = cli.ok("schedule", "--from-file", "timers.jsonl")
    assert counts == {"created": 3, "updated": 0, "kept": 0, "total": 3}
    assert sorted(cli.stored_keys()) == ["f1", "f2", "f3"]
    assert cli.ok("show", "f2")["timer"]["due_at"] == "2025-03-15T13:00:00Z"
    again = cli.ok("schedule", "--from-file", "timers.jsonl", "--on-conflict", "keep")
    assert again == {"created": 0, "updated": 0, "kept": 3, "total": 3}
    human = cli("schedule", "--from-file", "timers.jsonl")
    assert human.code == 0
    assert "updated" in human.stdout


def test_from_file_with_a_bad_line_stores_nothing(cli: Cli) -> None:
    lines = [
        '{"type": "greet", "at": "2025-03-15T13:00:00Z", "key": "f1"}',
        '{"type": "greet", "local": "2025-03-15T09:00", "timezone": "Mars/Olympus", "key": "f2"}',
        '{"type": "greet", "at": "2025-03-15T13:00:00Z", "key": "f3"}',
    ]
    (cli.cwd / "timers.jsonl").write_text("\n".join(lines) + "\n")
    error = cli.fails("schedule", "--from-file", "timers.jsonl", code=2)
    assert error["field"] == "line 2: timezone"
    assert error["code"] == "unknown_timezone"
    human = cli("schedule", "--from-file", "timers.jsonl")
    assert human.stderr.startswith("error [unknown_timezone] line 2: timezone: ")
    assert cli.stored_keys() == []


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ("{not json", "line 1"),
        ('["greet"]', "line 1"),
        ('{"at": "2025-03-15T13:00:00Z"}', "line 1: type"),
        ('{"type": "greet", "at": "2025-03-15T13:00:00Z", "colour": "red"}', "line 1: colour"),
    ],
)
def test_from_file_malformed_lines_are_named(cli: Cli, line: str, field: str) -> None:
    error = cli.fails("schedule", "--from-file", "-", input=line + "\n", code=2)
    assert error["field"] == field


def test_from_file_missing_file_and_mixed_flags(cli: Cli) -> None:
    assert cli.fails("schedule", "--from-file", "nope.jsonl", code=2)["field"] == "from_file"
    mixed = cli.fails("schedule", "greet", "--from-file", "-", input="", code=2)
    assert mixed["code"] == "usage"


def test_migrate_prints_the_schema_version(cli: Cli) -> None:
    first = cli.ok("migrate")
    assert first["schema_version"] >= 1
    assert first["applied"]
    assert cli.ok("migrate") == {"applied": [], "schema_version": first["schema_version"]}


def test_namespaces_are_separate(cli: Cli) -> None:
    assert cli.ok("namespaces", "create", "tenant-a") == {"name": "tenant-a", "created": True}
    cli.ok("schedule", "greet", "--delay", "60", "--key", "k", "--namespace", "tenant-a")
    assert [t["key"] for t in cli.ok("--namespace", "tenant-a", "ls")["items"]] == ["k"]
    env = {"DUETIME_NAMESPACE": "tenant-a"}
    assert [t["key"] for t in cli.ok("ls", env=env)["items"]] == ["k"]
    cli.ok("schedule", "greet", "--delay", "60", "--key", "other")
    assert [t["key"] for t in cli.ok("ls")["items"]] == ["other"]


def test_database_url_flag_wins_over_the_environment(cli: Cli) -> None:
    other = f"sqlite:///{cli.cwd / 'other.db'}"
    cli.ok("--database-url", other, "schedule", "greet", "--delay", "60", "--key", "k")
    assert (cli.cwd / "other.db").exists()
    assert not cli.db_path.exists()
    assert [t["key"] for t in cli.ok("ls", "--database-url", other)["items"]] == ["k"]


def test_show_says_when_a_lost_attempt_was_claimed_and_that_its_start_is_unknown(cli: Cli) -> None:
    """A worker claimed the timer and was lost before it reported a start: ``show`` gives the
    claim's instant and no start (never the claim's instant as if it had started then)."""
    import asyncio

    from duetime.store import create_store

    cli.ok("schedule", "greet", "--at", "2025-03-15T13:00:00Z", "--key", "lost")
    # a claim made ahead records the instant it looked ahead to
    claimed_at = datetime(2025, 3, 15, 13, 0, 0, 250000, tzinfo=UTC)
    lease_until = claimed_at + timedelta(seconds=30)

    async def lose_it() -> None:
        store = create_store(cli.db_url)
        await store.open()
        try:
            (claimed,) = await store.claim_due("default", None, claimed_at, 1, "n1", lease_until)
            assert claimed.timer.key == "lost"
            assert await store.rescue(lease_until + timedelta(seconds=1)) == [claimed.timer.id]
        finally:
            await store.close()

    asyncio.run(lose_it())
    shown = cli.ok("show", "lost")
    (attempt,) = shown["attempts"]
    assert attempt["outcome"] == "lost"
    assert _instant(attempt["claimed_at"]) == claimed_at
    assert attempt["started_at"] is None
    assert shown["timer"]["fired_at"] is None
    human = cli("show", "lost", env={"COLUMNS": "200"})
    assert human.code == 0
    lines = human.stdout.splitlines()
    header = next(line for line in lines if line.startswith("#"))
    assert header.split()[:5] == ["#", "node", "claimed", "started", "finished"]
    (row,) = [line for line in lines if line.startswith("1 ")]
    assert row.split()[:4] == ["1", "n1", "2025-03-15T13:00:00Z", "-"]  # claimed, no start


def test_ls_lists_one_schedules_occurrences(cli: Cli) -> None:
    cli.ok("schedules", "add", "hourly", "report.hourly", "--every", "PT1H")
    cli.ok("schedules", "add", "hourly:eu", "report.eu", "--every", "PT1H")
    cli.ok("schedule", "by-hand", "--delay", "PT1H", "--key", "schedule-hourly-by-hand")
    with App(database_url=cli.db_url, namespace="default") as app:
        app.tick()  # the schedules' occurrences become timers
    listed = cli.ok("ls", "--schedule", "hourly")
    keys = [timer["key"] for timer in listed["items"]]
    assert keys
    assert all(key.startswith("schedule:hourly:2") for key in keys), keys
    error = cli.fails("ls", "--schedule", "not a name", code=2)
    assert error["field"] == "schedule"
