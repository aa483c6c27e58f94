# ruff: noqa: F811 - the fixtures are imported from test_api_console
"""Finding, steering and acting through the REST API and the CLI, on SQLite and PostgreSQL:
payload search, sorted listings, type suggestions, a selection for bulk actions, charts with
lateness percentiles, editing a timer and running a schedule's next occurrence now."""

from __future__ import annotations

from pathlib import Path

import httpx

from duetime import App

from .conftest import Cli
from .test_api_console import NS, client, error_field, keys, server  # noqa: F401 - fixtures
from .test_api_serve import Server


def shell(server: Server, tmp_path: Path) -> Cli:
    """The CLI on the server's database, namespace shop."""
    cli = Cli(tmp_path)
    cli.env.update(
        DUETIME_DATABASE_URL=server.env["DUETIME_DATABASE_URL"], DUETIME_NAMESPACE="shop"
    )
    return cli


def test_payload_search_sort_and_types(
    client: httpx.Client, server: Server, tmp_path: Path
) -> None:
    assert keys(client, payload="n=1") == ["mail-1", "ship-1", "paid-1"]
    assert keys(client, payload="n=1", type="order.shipped") == ["ship-1"]
    assert keys(client, payload='n="1"') == []
    assert keys(client, type="order.shipped", sort="due", limit=1) == ["ship-0", "ship-1", "ship-2"]
    assert keys(client, status="dead", sort="attempts")[:1] == ["paid-4"]
    assert error_field(client.get(f"{NS}/timers", params={"payload": "n"})) == "payload"
    assert error_field(client.get(f"{NS}/timers", params={"payload": "a..b=1"})) == "payload"
    assert error_field(client.get(f"{NS}/timers", params={"sort": "size"})) == "sort"
    by_due = client.get(f"{NS}/timers", params={"sort": "due", "limit": 1}).json()
    wrong = client.get(f"{NS}/timers", params={"sort": "attempts", "cursor": by_due["next_cursor"]})
    assert error_field(wrong) == "cursor"
    types = client.get(f"{NS}/types", params={"prefix": "order."})
    assert types.json() == {"items": ["order.paid", "order.shipped"]}
    cli = shell(server, tmp_path)
    listed = cli.ok("ls", "--payload", "n=2", "--sort", "due")
    assert [t["key"] for t in listed["items"]] == ["paid-2", "ship-2"]  # dead now, then in 3 h
    assert cli.fails("ls", "--payload", "nothing", code=2)["field"] == "payload"


def test_bulk_replay_of_a_selection_of_keys(client: httpx.Client) -> None:
    body = {"action": "replay", "filter": {"keys": ["paid-0", "paid-3", "ship-0"]}}
    dry = client.post(f"{NS}/timers/bulk", json={**body, "dry_run": True})
    assert dry.json()["count"] == 2, dry.text
    assert client.post(f"{NS}/timers/bulk", json=body).json()["count"] == 2
    assert sorted(keys(client, status="dead")) == ["paid-1", "paid-2", "paid-4"]
    bad = client.post(f"{NS}/timers/bulk", json={"action": "replay", "filter": {"keys": []}})
    assert error_field(bad) == "filter.keys"
    unstorable = {"action": "replay", "filter": {"keys": ["paid-0", "x" * 1_000]}}
    too_long = client.post(f"{NS}/timers/bulk", json=unstorable)
    assert (too_long.status_code, error_field(too_long)) == (422, "filter.keys[1]")


def test_charts_bucket_the_range_with_lateness_percentiles(client: httpx.Client) -> None:
    hour = client.get(f"{NS}/charts").json()
    assert (hour["range"], hour["bucket_seconds"], len(hour["buckets"])) == ("1h", 60, 60)
    fired = [b for b in hour["buckets"] if b["fired"]]
    assert sum(b["fired"] for b in fired) >= 5
    assert all(b["lateness_p50_ms"] <= b["lateness_p99_ms"] <= b["lateness_max_ms"] for b in fired)
    week = client.get(f"{NS}/charts", params={"range": "7d", "type": "mail.*"}).json()
    assert (len(week["buckets"]), sum(b["fired"] for b in week["buckets"])) == (168, 0)
    assert error_field(client.get(f"{NS}/charts", params={"range": "2h"})) == "range"


def test_edit_a_pending_timer_and_run_a_schedules_next_occurrence(
    client: httpx.Client, server: Server, tmp_path: Path
) -> None:
    edited = client.patch(
        f"{NS}/timers/mail-0", json={"at": "2031-01-01T00:00:00Z", "payload": {"v": 2}}
    )
    assert edited.status_code == 200, edited.text
    with App(database_url=server.env["DUETIME_DATABASE_URL"], namespace="shop") as app:
        timer = app.get("mail-0")
        assert (timer.payload, timer.due_at.year) == ({"v": 2}, 2031)
        app.schedules.add("nightly", "report.nightly", cron="0 2 * * *")
        next_at = app.schedules.get("nightly").next_at
    assert client.patch(f"{NS}/timers/paid-1", json={"payload": {}}).status_code == 409
    assert error_field(client.patch(f"{NS}/timers/mail-0", json={"type": "x"})) == "type"
    cli = shell(server, tmp_path)
    assert cli.ok("edit", "mail-1", "--payload", '{"v": 3}')["timer"]["payload"] == {"v": 3}
    ran = client.post(f"{NS}/schedules/nightly/run-next")
    assert ran.status_code == 200, ran.text
    assert (
        ran.json()["timer"]["key"]
        == f"schedule:nightly:{next_at.isoformat().replace('+00:00', 'Z')}"
    )
    again = cli.ok("schedules", "run-next", "nightly")
    assert again["timer"]["key"] != ran.json()["timer"]["key"]  # the one after it
    with App(database_url=server.env["DUETIME_DATABASE_URL"], namespace="shop") as app:
        assert len(app.timers.history(type="report.nightly").items) == 2
