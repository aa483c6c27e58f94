"""``duetime schedules …`` and ``duetime next``, run in-process against a SQLite file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from duetime.cli.main import main


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    monkeypatch.setenv("DUETIME_DATABASE_URL", f"sqlite:///{tmp_path / 'duetime.db'}")
    monkeypatch.delenv("DUETIME_NAMESPACE", raising=False)

    def run(*args: str, code: int = 0) -> Any:
        exit_code = main([*args, "--json"])
        out, err = capsys.readouterr()
        assert exit_code == code, err
        assert "Traceback" not in err
        return json.loads(out) if code == 0 else json.loads(err.strip().splitlines()[-1])

    return run


def test_add_show_list_pause_resume_update_rm(cli: Any) -> None:
    added = cli(
        "schedules", "add", "greet:u1", "greet", "--cron", "0 9 * * *",
        "--timezone", "Asia/Tokyo", "--payload", '{"u": 1}', "--subject", "u1",
        "--catch-up", "all", "--on-gap", "skip", "--max-attempts", "3",
    )  # fmt: skip
    assert added["action"] == "created"
    schedule = added["schedule"]
    assert (schedule["cron"], schedule["timezone"], schedule["payload"]) == (
        "0 9 * * *",
        "Asia/Tokyo",
        {"u": 1},
    )
    assert (schedule["catch_up"], schedule["on_gap"], schedule["max_attempts"]) == (
        "all",
        "skip",
        3,
    )
    again = cli("schedules", "add", "greet:u1", "greet", "--cron", "0 9 * * *",
                "--timezone", "Asia/Tokyo", "--payload", '{"u": 1}', "--subject", "u1",
                "--catch-up", "all", "--on-gap", "skip", "--max-attempts", "3")  # fmt: skip
    assert again["action"] == "kept"
    cli("schedules", "add", "tick", "ping", "--every", "PT30S", "--paused")
    shown = cli("schedules", "show", "greet:u1", "--count", "2")
    assert shown["description"].startswith("At 09:00 every day (Asia/Tokyo); in a DST gap: skipped")
    assert [o["local"][11:] for o in shown["next"]] == ["09:00:00+09:00"] * 2
    listed = cli("schedules", "ls")
    assert [s["name"] for s in listed["items"]] == ["greet:u1", "tick"]
    assert [s["name"] for s in cli("schedules", "ls", "--paused")["items"]] == ["tick"]
    assert [s["name"] for s in cli("schedules", "ls", "--subject", "u1")["items"]] == ["greet:u1"]
    assert cli("schedules", "pause", "greet:u1")["schedule"]["active"] is False
    assert cli("schedules", "resume", "greet:u1")["schedule"]["active"] is True
    updated = cli("schedules", "update", "tick", "--cron", "*/5 * * * *")
    assert (updated["schedule"]["cron"], updated["schedule"]["every"]) == ("*/5 * * * *", None)
    removed = cli("schedules", "rm", "tick")
    assert (removed["action"], removed["cancelled"]) == ("deleted", 0)
    assert cli("schedules", "show", "tick", code=3)["code"] == "not_found"


def test_bad_input_names_the_field(cli: Any) -> None:
    assert cli("schedules", "add", "x", "t", "--cron", "0 25 * * *", code=2)["field"] == "cron"
    error = cli("schedules", "add", "x", "t", "--every", "5", "--timezone", "Mars/Olympus", code=2)
    assert (error["code"], error["field"]) == ("unknown_timezone", "timezone")
    assert cli("schedules", "add", "a b", "t", "--every", "60", code=2)["field"] == "name"
    assert cli("schedules", "add", "x", "t", code=2)["field"] == "cron"
    cli("schedules", "add", "x", "t", "--every", "60")
    assert (
        cli("schedules", "add", "x", "t", "--every", "60", "--on-conflict", "error", code=4)["code"]
        == "already_exists"
    )


def test_next_previews_utc_and_local_times(cli: Any) -> None:
    spring = cli(
        "next", "30 2 * * *", "--timezone", "America/New_York",
        "--after", "2025-03-08T00:00:00Z", "--count", "3",
    )  # fmt: skip
    assert spring["occurrences"] == [
        {"utc": "2025-03-08T07:30:00Z", "local": "2025-03-08T02:30:00-05:00"},
        {"utc": "2025-03-09T07:00:00Z", "local": "2025-03-09T03:00:00-04:00"},
        {"utc": "2025-03-10T06:30:00Z", "local": "2025-03-10T02:30:00-04:00"},
    ]
    every = cli("next", "--every", "PT1H", "--after", "2025-01-01T00:00:00Z", "--count", "2")
    assert len(every["occurrences"]) == 2
    cli("schedules", "add", "daily", "t", "--cron", "@daily", "--timezone", "Europe/Paris")
    stored = cli("next", "--schedule", "daily", "--after", "2025-06-01T00:00:00Z", "--count", "1")
    assert stored["occurrences"] == [
        {"utc": "2025-06-01T22:00:00Z", "local": "2025-06-02T00:00:00+02:00"}
    ]
    assert cli("next", "--schedule", "nope", code=3)["code"] == "not_found"
    assert cli("next", "61 * * * *", code=2)["field"] == "cron"
    assert cli("next", code=2)["code"] == "usage"


def test_overlap_and_catch_up_grace(cli: Any) -> None:
    added = cli("schedules", "add", "sync", "sync.run", "--every", "PT5M",
                "--overlap", "buffer_one", "--catch-up-grace", "PT10M")  # fmt: skip
    schedule = added["schedule"]
    assert (schedule["overlap"], schedule["catch_up_grace"]) == ("buffer_one", 600.0)
    updated = cli("schedules", "update", "sync", "--overlap", "skip", "--catch-up-grace", "90")
    assert (updated["schedule"]["overlap"], updated["schedule"]["catch_up_grace"]) == ("skip", 90)
    assert updated["schedule"]["every"] == 300.0  # the rest is left as it was
    shown = cli("schedules", "show", "sync")
    assert shown["schedule"]["overlap"] == "skip"


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--overlap", "queue"], "overlap"),
        (["--catch-up-grace", "-5"], "catch_up_grace"),
        (["--catch-up-grace", "P32D"], "catch_up_grace"),
        (["--catch-up-grace", "soon"], "catch_up_grace"),
    ],
)
def test_bad_overlap_or_grace_names_the_field(cli: Any, args: list[str], field: str) -> None:
    error = cli("schedules", "add", "x", "t", "--every", "60", *args, code=2)
    assert (error["code"], error["field"]) == ("invalid_input", field)
    cli("schedules", "add", "x", "t", "--every", "60")
    error = cli("schedules", "update", "x", *args, code=2)
    assert (error["code"], error["field"]) == ("invalid_input", field)
    assert cli("schedules", "show", "x")["schedule"]["overlap"] == "allow"
