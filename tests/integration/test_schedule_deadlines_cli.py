"""``duetime schedules`` with deadlines, in-process against a SQLite file: defined, shown and
changed; the ``ls`` table's deadline column with what the watch found; bad values refused."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from duetime import AsyncApp, FrozenClock
from duetime.cli.main import main


@pytest.fixture
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite:///{tmp_path / 'duetime.db'}"
    monkeypatch.setenv("DUETIME_DATABASE_URL", url)
    monkeypatch.delenv("DUETIME_NAMESPACE", raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    return url


def run(capsys: pytest.CaptureFixture[str], *args: str, code: int = 0) -> str:
    exit_code = main(list(args))
    out, err = capsys.readouterr()
    assert exit_code == code, err
    assert "Traceback" not in err
    return out if code == 0 else err


async def _watch_an_hour_on(url: str) -> int:
    clock = FrozenClock(datetime.now(UTC) + timedelta(hours=1))
    async with AsyncApp(url, "default", clock=clock) as app:
        return (await app.schedules.deadline_watch().tick()).missed


def test_a_deadline_is_defined_listed_and_its_misses_shown(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    added = json.loads(
        run(capsys, "schedules", "add", "report", "report.build", "--every", "PT10M",
            "--must-succeed-within", "PT5M", "--pause-after-failures", "3", "--json")
    )  # fmt: skip
    schedule = added["schedule"]
    assert (schedule["must_succeed_within"], schedule["pause_after_failures"]) == (300.0, 3)
    cell = "5m"
    assert cell in run(capsys, "schedules", "ls")
    missed = asyncio.run(_watch_an_hour_on(url))
    assert missed >= 5  # no worker ran for an hour: every occurrence missed
    table = run(capsys, "schedules", "ls")
    assert "deadline" in table
    assert f"5m, {missed} missed (not_created)" in table
    shown = run(capsys, "schedules", "show", "report")
    assert "must_succeed_within" in shown
    assert "not_created" in shown
    listed = json.loads(run(capsys, "schedules", "ls", "--json"))
    assert listed["items"][0]["deadline"]["misses"] == missed
    updated = json.loads(
        run(capsys, "schedules", "update", "report", "--must-succeed-within", "3600", "--json")
    )
    assert updated["schedule"]["must_succeed_within"] == 3600.0


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--must-succeed-within", "PT0.1S"], "must_succeed_within"),
        (["--must-succeed-within", "soon"], "must_succeed_within"),
        (["--pause-after-failures", "0"], "pause_after_failures"),
    ],
)
def test_bad_deadline_settings_name_the_field(
    url: str, capsys: pytest.CaptureFixture[str], args: list[str], field: str
) -> None:
    err = run(capsys, "schedules", "add", "x", "t", "--every", "60", *args, "--json", code=2)
    error: dict[str, Any] = json.loads(err.strip().splitlines()[-1])
    assert (error["code"], error["field"]) == ("invalid_input", field)
