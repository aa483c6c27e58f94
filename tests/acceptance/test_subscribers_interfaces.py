"""A timer nobody would deliver says so, on SQLite and PostgreSQL: ``subscribers`` in the API's
and the CLI's timers, ``warnings`` when scheduling one, the stats' count by type; and
``serve --app`` serves an app bound to its own database there."""

from __future__ import annotations

import contextlib
import json
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from duetime import App

from .test_api_serve import Server, make_server, wait_for

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from storekit import pooled_pg_url

pytestmark = pytest.mark.slow  # real servers and workers

NS = "/v1/namespaces/shop"


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """``serve --app handlers:app``: a worker with handlers for followup.email, slow.job and
    doomed in namespace shop, and none for anything else."""
    server = make_server(tmp_path_factory.mktemp(request.param))
    with contextlib.ExitStack() as schemas:
        if request.param == "postgres":
            server.env["DUETIME_DATABASE_URL"] = schemas.enter_context(pooled_pg_url())
        with App(database_url=server.env["DUETIME_DATABASE_URL"], namespace="shop"):
            pass  # the namespace exists
        server.start("--app", "handlers:app")
        try:
            yield server
        finally:
            server.stop()


@pytest.fixture
def client(server: Server) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


def test_the_api_says_how_many_live_nodes_would_deliver_a_timer(client: httpx.Client) -> None:
    key = f"paid-{uuid.uuid4().hex[:8]}"
    nobody = client.post(f"{NS}/timers", json={"type": "order.paid", "delay": "PT1H", "key": key})
    assert nobody.status_code == 201, nobody.text
    answer = nobody.json()
    assert answer["timer"]["subscribers"] == 0
    (warning,) = answer["warnings"]
    assert warning["code"] == "no_subscriber"
    assert warning["field"] == "type"
    assert "no subscriber for 'order.paid'" in warning["message"]

    handled = client.post(f"{NS}/timers", json={"type": "followup.email", "delay": "PT1H"})
    assert handled.status_code == 201
    assert handled.json()["timer"]["subscribers"] == 1
    assert handled.json()["warnings"] == []

    shown = client.get(f"{NS}/timers/{key}").json()["timer"]
    assert shown["subscribers"] == 0
    listed = {t["key"]: t["subscribers"] for t in client.get(f"{NS}/timers").json()["items"]}
    assert listed[key] == 0
    assert listed[handled.json()["timer"]["key"]] == 1

    event = client.post(f"{NS}/events", json={"type": "audit.logged"})
    assert event.json()["warnings"][0]["code"] == "no_subscriber"

    stats = client.get(f"{NS}/stats").json()
    waiting = {item["type"]: item["count"] for item in stats["unsubscribed"]}
    assert waiting.get("order.paid", 0) >= 1
    assert "followup.email" not in waiting
    assert all("subscribers" in timer for timer in stats["next_due"])
    assert client.delete(f"{NS}/timers/{key}").json()["timer"]["subscribers"] == 0


def test_the_cli_warns_on_stderr_and_show_json_carries_the_count(server: Server) -> None:
    cli = server.shell()  # what the commands say, beside the server: in this process
    key = f"shipped-{uuid.uuid4().hex[:8]}"
    args = ("--namespace", "shop")
    done = cli("schedule", "order.shipped", "--delay", "PT1H", "--key", key, *args)
    assert done.code == 0, done.stderr
    assert "warning [no_subscriber] no subscriber for 'order.shipped'" in done.stderr
    assert "subscribers    0: no subscriber for order.shipped" in done.stdout
    as_json = cli("schedule", "order.shipped", "--delay", "PT1H", "--json", *args)
    assert as_json.code == 0, as_json.stderr
    document = json.loads(as_json.stdout)
    assert document["timer"]["subscribers"] == 0
    assert document["warnings"][0]["code"] == "no_subscriber"
    assert json.loads(as_json.stderr.splitlines()[-1])["code"] == "no_subscriber"

    handled = cli("schedule", "followup.email", "--delay", "PT1H", "--json", *args)
    assert handled.code == 0, handled.stderr
    assert handled.stderr == ""
    assert json.loads(handled.stdout)["warnings"] == []

    shown = cli("show", key, "--json", *args)
    assert json.loads(shown.stdout)["timer"]["subscribers"] == 0
    listed = cli("ls", "--type", "followup.email", "--json", *args)
    assert {t["subscribers"] for t in json.loads(listed.stdout)["items"]} == {1}


OWN_DATABASE_APP = """
import os

import duetime

app = duetime.App("sqlite:///own.db", namespace="shop")


@app.handler("order.paid")
def paid(event):
    with open(os.environ["DUETIME_TEST_OUT"], "a") as out:
        out.write(event.key + "\\n")
"""


def test_serve_app_serves_the_apps_own_database(tmp_path: Path) -> None:
    server = make_server(tmp_path)
    del server.env["DUETIME_DATABASE_URL"]  # the default would be ./duetime.db
    (server.cwd / "ownapp.py").write_text(OWN_DATABASE_APP)
    server.start("--app", "ownapp:app")
    try:
        with server.client() as client:
            made = client.post(
                f"{NS}/timers", json={"type": "order.paid", "key": "paid-1", "delay": 0}
            )
            assert made.status_code == 201, made.text
            assert made.json()["timer"]["subscribers"] == 1
        wait_for(lambda: server.fired() == ["paid-1"])
    finally:
        assert server.stop() == 0, server.log()
    assert not (server.cwd / "duetime.db").exists()
    with App(database_url=f"sqlite:///{server.cwd / 'own.db'}", namespace="shop") as app:
        assert app.get("paid-1").status.value == "done"


def test_serve_app_refuses_a_database_url_flag_naming_another_database(tmp_path: Path) -> None:
    server = make_server(tmp_path)
    (server.cwd / "ownapp.py").write_text(OWN_DATABASE_APP)
    done = server.cli("serve", "--database-url", "sqlite:///other.db", "--app", "ownapp:app")
    assert done.returncode == 2, done.stderr
    assert "database_url: --database-url sqlite:///other.db differs from ownapp:app's own" in (
        done.stderr
    )
