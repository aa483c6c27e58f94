"""A schedule's backfill from the CLI and REST: listed first with a dry run, made once, and
bad ranges refused naming the field (nothing stored)."""

from __future__ import annotations

from pathlib import Path

from duetime import App
from duetime.api import ApiSettings, create_api
from duetime.config import Settings

from .conftest import Cli


def test_cli_backfill_lists_then_makes_once(cli: Cli) -> None:
    cli.ok("migrate")
    cli.ok("schedules", "add", "daily", "report", "--cron", "0 9 * * *")
    span = ("--from", "2025-03-01T00:00:00Z", "--to", "2025-03-03T23:00:00Z")
    dry = cli.ok("schedules", "backfill", "daily", *span, "--dry-run")
    assert [o["key"] for o in dry["occurrences"]] == [
        "schedule:daily:2025-03-01T09:00:00Z",
        "schedule:daily:2025-03-02T09:00:00Z",
        "schedule:daily:2025-03-03T09:00:00Z",
    ]
    assert (dry["dry_run"], dry["created"]) == (True, 0)
    shown = cli("schedules", "backfill", "daily", *span, "--dry-run")
    assert "schedule:daily:2025-03-02T09:00:00Z" in shown.stdout, shown.stderr
    made = cli.ok("schedules", "backfill", "daily", *span)
    assert (made["created"], made["existing"]) == (3, 0)
    again = cli("schedules", "backfill", "daily", *span)
    assert "0 created, 3 stored already" in again.stdout, again.stderr
    error = cli.fails(
        "schedules",
        "backfill",
        "daily",
        "--from",
        "2025-03-04T00:00:00Z",
        "--to",
        "2025-03-01T00:00:00Z",
        code=2,
    )
    assert error["field"] == "from"
    error = cli.fails(
        "schedules",
        "backfill",
        "daily",
        "--from",
        "2025-03-01T00:00:00Z",
        "--to",
        "2999-03-01T00:00:00Z",
        code=2,
    )
    assert error["field"] == "to"
    cli.ok("schedules", "add", "minutely", "tick", "--cron", "* * * * *")
    wide = ("--from", "2025-01-01T00:00:00Z", "--to", "2025-01-08T00:00:00Z")
    assert cli.fails("schedules", "backfill", "minutely", *wide, code=2)["field"] == "yes"
    assert cli.ok("schedules", "backfill", "minutely", *wide, "--yes")["created"] == 10081


def test_rest_backfill(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    url = f"sqlite:///{tmp_path / 'duetime.db'}"
    with App(settings=Settings(database_url=url, namespace="shop")) as app:
        app.schedules.add("hourly", "ping", cron="0 * * * *")
    with TestClient(create_api(ApiSettings(core=Settings(database_url=url)))) as client:
        path = "/v1/namespaces/shop/schedules/hourly/backfill"
        body = {"from": "2025-03-01T00:00:00Z", "to": "2025-03-01T05:30:00Z"}
        dry = client.post(path, json={**body, "dry_run": True})
        assert dry.status_code == 200, dry.text
        assert dry.json()["count"] == 6
        made = client.post(path, json=body)
        assert (made.json()["created"], made.json()["existing"]) == (6, 0)
        assert client.post(path, json=body).json()["created"] == 0
        for bad, field in [
            ({"from": "2025-03-02T00:00:00Z"}, "from"),
            ({"to": "2999-01-01T00:00:00Z"}, "to"),
            ({"to": None}, "to"),
            ({"since": "x"}, "since"),
        ]:
            refused = client.post(path, json={**body, **bad})
            assert refused.status_code == 422, refused.text
            assert refused.json()["field"] == field
        missing = client.post("/v1/namespaces/shop/schedules/nope/backfill", json=body)
        assert missing.status_code == 404
