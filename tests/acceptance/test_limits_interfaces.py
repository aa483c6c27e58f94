"""Flow control from Python, the CLI and REST: the same rules, and bad values refused naming
their field (nothing stored)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from duetime import App
from duetime.api import ApiSettings, create_api
from duetime.config import Settings
from duetime.errors import InvalidInput, NotFound

from .conftest import Cli


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    with App(settings=Settings(database_url=f"sqlite:///{tmp_path / 'duetime.db'}")) as opened:
        yield opened


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"rate": "0/s"}, "rate"),
        ({"rate": "fast"}, "rate"),
        ({"concurrency": -1}, "concurrency"),
        ({"concurrency": 0}, "concurrency"),
        ({"concurrency": "5"}, "concurrency"),
        ({"rate": "10/s", "burst": 0}, "burst"),
        ({"concurrency": 2, "partition_by": "user"}, "partition_by"),
        ({}, "concurrency"),
    ],
)
def test_python_bad_limits_name_the_field(app: App, kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        app.limits.set("email.*", **kwargs)  # type: ignore[arg-type]
    assert raised.value.field == field
    assert app.limits.list() == []


def test_python_limits_pause_and_resume(app: App) -> None:
    rule = app.limits.set("email.*", rate="100/s", concurrency=5)
    assert (rule.concurrency, str(rule.rate), rule.effective_burst) == (5, "100/s", 5)
    app.limits.pause("crm.sync")
    listed = {s.rule.pattern: s for s in app.limits.list()}
    assert set(listed) == {"email.*", "crm.sync"}
    assert listed["crm.sync"].rule.paused
    app.limits.resume("crm.sync")
    with pytest.raises(NotFound):
        app.limits.resume("crm.sync")
    app.limits.remove("email.*")
    with pytest.raises(NotFound):
        app.limits.remove("email.*")
    assert app.limits.list() == []
    with pytest.raises(InvalidInput) as raised:
        app.limits.pause("bad pattern!")
    assert raised.value.field == "pattern"


def test_cli_limits(cli: Cli) -> None:
    cli.ok("migrate")
    answer = cli.ok("limits", "set", "email.*", "--rate", "200/s", "--burst", "20")
    assert answer["limit"]["rate"] == "200/s"
    assert answer["limit"]["burst"] == 20
    for args, field in [
        (("--rate", "0/s"), "rate"),
        (("--rate", "fast"), "rate"),
        (("--concurrency", "-1"), "concurrency"),
        (("--burst", "3"), "burst"),
    ]:
        error = cli.fails("limits", "set", "x", *args, code=2)
        assert error["field"] == field, error
    cli.ok("pause", "crm.*")
    items = {i["pattern"]: i for i in cli.ok("limits", "ls")["items"]}
    assert items["crm.*"]["paused"]
    assert items["email.*"]["held"] == 0
    cli.ok("resume", "crm.*")
    assert cli.fails("resume", "crm.*", code=3)["code"] == "not_found"
    cli.ok("limits", "rm", "email.*")
    assert cli.ok("limits", "ls")["items"] == []


def test_rest_limits(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    url = f"sqlite:///{tmp_path / 'duetime.db'}"
    settings = Settings(database_url=url)
    with App(settings=Settings(database_url=url, namespace="shop")):
        pass  # creates the namespace
    with TestClient(create_api(ApiSettings(core=settings))) as client:
        base = "/v1/namespaces/shop"
        answer = client.put(f"{base}/limits/email.*", json={"rate": "6000/min", "concurrency": 3})
        assert answer.status_code == 200, answer.text
        assert answer.json()["limit"]["rate"] == "6000/min"
        for body, field in [
            ({"rate": "0/s"}, "rate"),
            ({"rate": "fast"}, "rate"),
            ({"concurrency": -1}, "concurrency"),
            ({"rate": 5}, "rate"),
            ({"speed": 5}, "speed"),
        ]:
            refused = client.put(f"{base}/limits/email.*", json=body)
            assert refused.status_code == 422, refused.text
            assert refused.json()["field"] == field
        assert client.post(f"{base}/pause", json={"pattern": "crm.*"}).status_code == 200
        assert client.post(f"{base}/pause", json={}).json()["field"] == "pattern"
        items = {i["pattern"]: i for i in client.get(f"{base}/limits").json()["items"]}
        assert items["crm.*"]["paused"]
        assert items["email.*"]["concurrency"] == 3
        assert client.post(f"{base}/resume", json={"pattern": "crm.*"}).status_code == 200
        assert client.post(f"{base}/resume", json={"pattern": "crm.*"}).status_code == 404
        assert client.delete(f"{base}/limits/email.*").status_code == 200
        assert client.delete(f"{base}/limits/email.*").status_code == 404
        assert client.get(f"{base}/limits").json()["items"] == []
        assert client.get("/v1/namespaces/nope/limits").status_code == 404


def test_a_destinations_rate_is_listed_as_its_own_by_the_cli_and_rest(cli: Cli) -> None:
    from fastapi.testclient import TestClient

    from duetime.destinations import WebhookDestination

    app = App(settings=Settings(database_url=cli.db_url))
    app.add_destination(WebhookDestination("hook", "http://127.0.0.1:9/", rate="30/s", burst=4))
    with app:
        app.limits.set("order.*", concurrency=2)
    items = {i["pattern"]: i for i in cli.ok("limits", "ls")["items"]}
    assert items["@hook"]["destination"] == "hook"
    assert (items["@hook"]["rate"], items["@hook"]["burst"]) == ("30/s", 4)
    assert items["order.*"]["destination"] is None
    shown = cli("limits", "ls")
    assert shown.code == 0, shown.stderr
    assert "destination hook" in shown.stdout
    # It is the destination's: neither the CLI nor REST removes or replaces it.
    assert cli.fails("limits", "rm", "@hook", code=2)["field"] == "pattern"
    with TestClient(create_api(ApiSettings(core=Settings(database_url=cli.db_url)))) as client:
        listed = client.get("/v1/namespaces/default/limits").json()["items"]
        assert {i["pattern"]: i["destination"] for i in listed} == {
            "@hook": "hook",
            "order.*": None,
        }
        refused = client.put("/v1/namespaces/default/limits/@hook", json={"rate": "1/s"})
        assert refused.status_code == 422


def test_a_namespace_past_its_cap_of_rules_is_refused_everywhere(tmp_path: Path, cli: Cli) -> None:
    """``max_limits`` bounds the rules a tenant can make: Python, the CLI and REST refuse one
    more naming ``pattern`` and the cap; the listing pages them."""
    from fastapi.testclient import TestClient

    from duetime.errors import CapReached

    url = f"sqlite:///{tmp_path / 'caps.db'}"
    with App(settings=Settings(database_url=url, namespace="shop", max_limits=3)) as app:
        for pattern in ("a", "b"):
            app.limits.set(pattern, concurrency=1)
        app.limits.pause("c")
        with pytest.raises(CapReached) as raised:
            app.limits.set("d", concurrency=1)
        assert raised.value.field == "pattern"
        app.limits.set("a", concurrency=2)  # an existing rule changes freely
        first = app.limits.page(limit=2)
        assert [s.rule.pattern for s in first.items] == ["a", "b"]
        rest = app.limits.page(cursor=first.next_cursor, limit=2)
        assert [s.rule.pattern for s in rest.items] == ["c"]
        assert rest.next_cursor is None
    settings = Settings(database_url=url, max_limits=3)
    with TestClient(create_api(ApiSettings(core=settings))) as client:
        base = "/v1/namespaces/shop"
        refused = client.put(f"{base}/limits/d", json={"concurrency": 1})
        assert refused.status_code == 422, refused.text
        body = refused.json()
        assert (body["code"], body["field"], body["limit"]) == ("cap_reached", "pattern", 3)
        assert "max_limits" in body["message"]
        assert client.post(f"{base}/pause", json={"pattern": "d"}).status_code == 422
        page = client.get(f"{base}/limits", params={"limit": 2}).json()
        assert [i["pattern"] for i in page["items"]] == ["a", "b"]
        more = client.get(f"{base}/limits", params={"limit": 2, "cursor": page["next_cursor"]})
        assert [i["pattern"] for i in more.json()["items"]] == ["c"]
    cli.ok("migrate")
    cli.ok("limits", "set", "a", "--concurrency", "1", env={"DUETIME_MAX_LIMITS": "1"})
    error = cli.fails(
        "limits", "set", "b", "--concurrency", "1", code=2, env={"DUETIME_MAX_LIMITS": "1"}
    )
    assert (error["code"], error["field"]) == ("cap_reached", "pattern"), error
    cli.ok("limits", "set", "b", "--concurrency", "1", env={"DUETIME_MAX_LIMITS": "2"})
    listed = cli.ok("limits", "ls", "--limit", "1")
    assert [i["pattern"] for i in listed["items"]] == ["a"]
    assert listed["next_cursor"]
