"""``--routes FILE`` on ``duetime worker`` and ``tick``: destinations and routes from JSON, with or
without an app; every mistake refused at start, naming the path to fix; ``nodes`` shows what each
worker subscribes to."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from .conftest import Cli
from .test_api_serve import make_server
from .test_api_serve import wait_for as wait_until
from .test_cli_worker import handled, running, wait_for


class Hook:
    """A real HTTP receiver on a thread: records each POSTed envelope, answers ``status``."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.keys: list[str] = []
        self.status = 200
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                hook.bodies.append(json.loads(self.rfile.read(length)))
                hook.keys.append(self.headers.get("Idempotency-Key", ""))
                self.send_response(hook.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hook() -> Iterator[Hook]:
    receiver = Hook()
    yield receiver
    receiver.close()


def write_routes(cli: Cli, document: dict[str, Any]) -> str:
    path = cli.cwd / "routes.json"
    path.write_text(json.dumps(document))
    return str(path)


def routes_to(url: str) -> dict[str, Any]:
    return {
        "destinations": {"billing-hook": {"kind": "webhook", "url": url}},
        "routes": [{"namespace": "default", "type": "order.*", "to": ["billing-hook"]}],
    }


def test_tick_with_only_a_routes_file_delivers_to_its_destinations(cli: Cli, hook: Hook) -> None:
    routes = write_routes(cli, routes_to(hook.url))
    cli.ok("emit", "order.paid", "--payload", '{"order": 7}', "--key", "o-7")
    cli.ok("emit", "user.created", "--key", "u-1")
    stats = cli.ok("tick", "--routes", routes)
    assert stats["outcomes"] == {"done": 1}
    (body,) = hook.bodies
    assert (body["key"], body["destination"], body["producer"]) == ("o-7", "billing-hook", "cli")
    assert hook.keys == ["default:o-7:billing-hook"]
    assert cli.ok("show", "u-1")["timer"]["status"] == "scheduled"  # nobody here takes it


def test_a_worker_with_an_app_and_routes_fans_out_and_shows_its_subscriptions(
    cli: Cli, app_module: str, hook: Hook
) -> None:
    routes = write_routes(
        cli,
        {
            "destinations": {"audit": {"kind": "webhook", "url": hook.url}},
            "routes": [{"type": "*", "to": ["audit"]}],
        },
    )
    with running(cli, "worker", "--app", app_module, "--routes", routes) as worker:
        wait_for(lambda: bool(cli.ok("nodes")["items"]))
        (node,) = cli.ok("nodes")["items"]
        assert node["pid"] == worker.pid
        assert node["subscriptions"] == [
            {"namespace": "default", "type": "broken", "to": ["handler"]},
            {"namespace": "default", "type": "doomed", "to": ["handler"]},
            {"namespace": "default", "type": "greet", "to": ["handler"]},
            {"namespace": "default", "type": "stuck", "to": ["handler"]},
            {"namespace": "default", "type": "*", "to": ["audit"]},
        ]
        assert "greet → handler" in cli("nodes").stdout
        cli.ok("emit", "greet", "--key", "g-1")
        wait_for(lambda: cli.ok("show", "g-1@audit")["timer"]["status"] == "done")
        wait_for(lambda: cli.ok("show", "g-1@handler")["timer"]["status"] == "done")
        shown = cli.ok("show", "g-1")
        assert shown["attempts"][0]["outcome"] == "fanned_out"
    assert handled(cli) == ["g-1"]
    assert [b["key"] for b in hook.bodies] == ["g-1"]


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ({"routes": [{"type": "order.*", "to": ["nowhere"]}]}, "routes[0].to[0]"),
        (
            {
                "destinations": {"h": {"kind": "webhook", "url": "http://127.0.0.1:9/x"}},
                "routes": [{"type": "a", "to": ["h"]}, {"type": "b", "to": ["h", "nope"]}],
            },
            "routes[1].to[1]",
        ),
        ({"routes": [{"type": "order paid", "to": ["h"]}]}, "routes[0].type"),
        ({"routes": [{"type": "a", "to": []}]}, "routes[0].to"),
        ({"routes": [{"type": "a", "to": ["handler"]}]}, "routes[0].to[0]"),
        ({"routes": [{"type": "a", "to": ["h"], "extra": 1}]}, "routes[0].extra"),
        ({"routes": [{"namespace": "Bad NS", "type": "a", "to": ["h"]}]}, "routes[0].namespace"),
        ({"routes": []}, "routes"),
        ({"routs": []}, "routs"),
        (
            {
                "destinations": {"h": {"kind": "webhook", "url": "ftp://x"}},
                "routes": [{"type": "a", "to": ["h"]}],
            },
            "destinations.h.url",
        ),
        (
            {
                "destinations": {"h": {"kind": "webhook", "url": "http://x", "secret_env": "NOPE"}},
                "routes": [{"type": "a", "to": ["h"]}],
            },
            "secret_env",
        ),
    ],
)
def test_a_bad_routes_file_is_refused_at_start(
    cli: Cli, document: dict[str, Any], field: str
) -> None:
    routes = write_routes(cli, document)
    for command in ("worker", "tick"):
        error = cli.fails(command, "--routes", routes, code=2)
        assert error["field"] == field, error


def test_routes_that_are_not_json_or_missing_are_refused(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "broken.json").write_text("{nope")
    assert cli.fails("tick", "--routes", "broken.json", code=2)["field"] == "routes"
    assert cli.fails("tick", "--routes", "absent.json", code=2)["field"] == "routes"
    inline = json.dumps({"routes": [{"type": "a", "to": ["x"]}]})
    assert cli.fails("tick", "--routes", inline, code=2)["field"] == "routes[0].to[0]"


def test_a_worker_needs_an_app_or_routes(cli: Cli) -> None:
    result = cli("worker")
    assert result.code == 2
    assert "--routes" in result.stderr


@pytest.mark.slow
def test_serve_with_routes_and_an_app_runs_both_and_shows_them(tmp_path: Path, hook: Hook) -> None:
    """``serve --app handlers:app --routes FILE``: the app's namespace gets its routes too, and
    a namespace with routes only gets a worker of its own."""
    server = make_server(tmp_path)
    (server.cwd / "routes.json").write_text(
        json.dumps(
            {
                "destinations": {"hook": {"kind": "webhook", "url": hook.url}},
                "routes": [
                    {"namespace": "shop", "type": "followup.*", "to": ["hook"]},
                    {"namespace": "audit", "type": "*", "to": ["hook"]},
                ],
            }
        )
    )
    server.start("--app", "handlers:app", "--routes", "routes.json")
    try:
        with server.client() as client:
            emitted = client.post("/v1/namespaces/shop/events", json={"type": "followup.email"})
            assert emitted.status_code == 201, emitted.text
            key = emitted.json()["timer"]["key"]
            client.post("/v1/namespaces/audit/events", json={"type": "login", "key": "l-1"})
            wait_until(lambda: len(hook.bodies) == 2)
            wait_until(lambda: server.fired() == [key])
            assert sorted((b["namespace"], b["producer"]) for b in hook.bodies) == [
                ("audit", "api"),
                ("shop", "api"),
            ]
            nodes = client.get("/v1/nodes").json()["items"]
            routed = sorted(
                (s["namespace"], s["type"], s["to"][0])
                for node in nodes
                for s in node["subscriptions"]
                if s["to"] != ["handler"]
            )
            assert routed == [("audit", "*", "hook"), ("shop", "followup.*", "hook")]
            shown = client.get(f"/v1/namespaces/shop/timers/{key}@hook").json()
            assert shown["timer"]["destination"] == "hook"
            assert shown["attempts"][0]["outcome"] == "done"
    finally:
        assert server.stop() == 0, server.log()
