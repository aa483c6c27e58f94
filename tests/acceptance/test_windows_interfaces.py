"""Run windows from the CLI and REST: the chosen instant shown beside the nominal one, the
warning of a window too short for its type's rate limit, and bad windows refused naming the
field (nothing stored)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from duetime import App
from duetime.api import ApiSettings, create_api
from duetime.config import Settings
from duetime.timemath.run_window import hashed_instant

from .conftest import Cli

NINE = datetime(2030, 1, 7, 9, 0, tzinfo=UTC)


def test_cli_schedules_with_a_window_and_refuses_a_bad_one(cli: Cli) -> None:
    cli.ok("migrate")
    answer = cli.ok(
        "schedule", "greet", "--at", "2030-01-07T09:00:00Z", "--key", "g-1", "--window", "PT15M"
    )
    timer = answer["timer"]
    expected = hashed_instant("default", "g-1", NINE, timedelta(minutes=15))
    assert timer["due_at"] == "2030-01-07T09:00:00Z"
    assert datetime.fromisoformat(timer["run_at"]) == expected
    assert (timer["window"], timer["spread"]) == (900.0, "hash")
    shown = cli("show", "g-1")
    assert "0:15:00 (hash)" in shown.stdout, shown.stdout
    for window in ("PT0S", "-PT1M", "soon"):
        error = cli.fails(
            "schedule", "greet", "--at", "2030-01-07T09:00:00Z", "--window", window, code=2
        )
        assert error["field"] == "window", error
    error = cli.fails("schedule", "greet", "--delay", "60", "--spread", "even", code=2)
    assert error["field"] == "spread"


def test_cli_warns_of_a_window_its_rate_limit_cannot_hold(cli: Cli) -> None:
    cli.ok("migrate")
    cli.ok("limits", "set", "greet", "--rate", "1/h", "--burst", "1")
    cli.ok("schedule", "greet", "--at", "2030-01-07T09:00:00Z", "--window", "PT1M", "--key", "a")
    result = cli("schedule", "greet", "--at", "2030-01-07T09:00:00Z", "--window", "PT1M")
    assert result.code == 0, result.stderr  # stored all the same
    assert "warning [window_over_rate] 2 timer(s) of 'greet'" in result.stderr


def test_rest_windows_answer_the_chosen_instant_and_warn(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    url = f"sqlite:///{tmp_path / 'duetime.db'}"
    with App(settings=Settings(database_url=url, namespace="shop")) as app:
        app.limits.set("slow", rate="1/h", burst=1)
    with TestClient(create_api(ApiSettings(core=Settings(database_url=url)))) as client:
        base = "/v1/namespaces/shop/timers"
        body = {"type": "greet", "at": "2030-01-07T09:00:00Z", "key": "k", "window": "PT15M"}
        created = client.post(base, json=body)
        assert created.status_code == 201, created.text
        timer = created.json()["timer"]
        expected = hashed_instant("shop", "k", NINE, timedelta(minutes=15))
        assert datetime.fromisoformat(timer["run_at"]) == expected
        assert (timer["due_at"], timer["window"], timer["spread"]) == (
            "2030-01-07T09:00:00Z",
            900.0,
            "hash",
        )
        assert client.get(f"{base}/k").json()["timer"]["window"] == 900.0
        even = client.post(base, json={**body, "key": "e", "window": 60, "spread": "even"})
        assert even.json()["timer"]["run_at"] == "2030-01-07T09:00:00Z"  # alone in its group
        for bad, field in [
            ({"window": "PT0S"}, "window"),
            ({"window": -5}, "window"),
            ({"window": "later"}, "window"),
            ({"spread": "random", "window": "PT1M"}, "spread"),
            ({"spread": "even", "window": None}, "spread"),
        ]:
            refused = client.post(base, json={**body, "key": "bad", **bad})
            assert refused.status_code == 422, refused.text
            assert refused.json()["field"] == field, refused.text
        assert client.get(f"{base}/bad").status_code == 404
        # A rate of one an hour cannot start two in a minute: the second put says so.
        slow = {"type": "slow", "at": "2030-01-07T09:00:00Z", "window": "PT1M"}
        client.post(base, json={**slow, "key": "s-1"})
        warned = client.post(base, json={**slow, "key": "s-2"})
        assert warned.status_code == 201, warned.text
        codes = [w["code"] for w in warned.json()["warnings"]]
        assert "window_over_rate" in codes, warned.text
        assert [w["field"] for w in warned.json()["warnings"] if w["code"] in codes[-1:]] == [
            "window"
        ]
        metrics = client.get("/metrics").text
        assert 'duetime_window_over_rate_total{namespace="shop",type="slow"} 1.0' in metrics


@pytest.mark.parametrize("window", ["PT0S", "nope"])
def test_python_refuses_a_bad_window_naming_it(tmp_path: Path, window: str) -> None:
    from duetime.errors import InvalidInput

    with App(settings=Settings(database_url=f"sqlite:///{tmp_path / 'd.db'}")) as app:
        with pytest.raises(InvalidInput) as raised:
            app.schedule("greet", at=NINE, window=window)
        assert raised.value.field == "window"
        assert app.timers.history().items == []


def test_schedule_windows_over_rest_and_the_cli(cli: Cli) -> None:
    from fastapi.testclient import TestClient

    cli.ok("migrate")
    added = cli.ok(
        "schedules", "add", "daily", "report", "--cron", "0 9 * * *", "--window", "PT10M"
    )
    assert added["schedule"]["window"] == 600.0
    error = cli.fails(
        "schedules", "add", "hourly", "ping", "--cron", "0 * * * *", "--window", "PT2H", code=2
    )
    assert error["field"] == "window"
    with TestClient(create_api(ApiSettings(core=Settings(database_url=cli.db_url)))) as client:
        base = "/v1/namespaces/default/schedules"
        made = client.post(base, json={"name": "w", "type": "t", "every": "PT1H", "window": 900})
        assert made.status_code == 201, made.text
        assert made.json()["schedule"]["window"] == 900.0
        too_long = client.post(
            base, json={"name": "w2", "type": "t", "every": "PT1H", "window": "PT2H"}
        )
        assert too_long.status_code == 422, too_long.text
        assert too_long.json()["field"] == "window"
        changed = client.patch(f"{base}/w", json={"window": None})
        assert changed.status_code == 200, changed.text
        assert changed.json()["schedule"]["window"] is None
