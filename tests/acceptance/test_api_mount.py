"""duetime.api.mount: the API, dashboard and worker inside the user's own FastAPI or Starlette
application, under a prefix and behind a proxy's root_path, started by the parent's lifespan."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route
from tests.waiting import wait_until

import duetime
from duetime.api import mount

LOCAL = "http://127.0.0.1"  # a Host the mounted API answers with auth off (loopback by default)


def make_app(tmp_path: Path, fired: list[Any]) -> duetime.AsyncApp:
    app = duetime.AsyncApp(f"sqlite:///{tmp_path / 'mounted.db'}")

    @app.handler("greet")
    async def greet(event: duetime.Event) -> None:
        fired.append(event.payload)

    return app


def test_mounted_under_a_prefix_everything_answers_and_the_worker_runs(tmp_path: Path) -> None:
    fired: list[Any] = []
    dt = make_app(tmp_path, fired)
    started: list[str] = []

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # duetime is up before the parent's own startup code: it may schedule here
        started.append(
            (await dt.schedule("greet", {"from": "startup"}, key="boot", delay=0)).action
        )
        yield

    parent = FastAPI(lifespan=lifespan)

    @parent.post("/signup")
    async def signup() -> dict[str, str]:
        return {
            "key": (await dt.schedule("greet", {"from": "route"}, key="signup", delay=0)).timer.key
        }

    mount(parent, "/duetime", app=dt, worker=True)
    with TestClient(parent, base_url=LOCAL) as client:
        assert started == ["created"]
        assert client.post("/signup").json() == {"key": "signup"}
        made = client.post(
            "/duetime/v1/namespaces/default/timers",
            json={"type": "greet", "payload": {"from": "api"}, "key": "api", "delay": "PT0S"},
        )
        assert made.status_code == 201, made.text
        wait_until(lambda: len(fired) == 3, 20, "the in-process worker to run all three")
        assert sorted(p["from"] for p in fired) == ["api", "route", "startup"]

        assert client.get("/duetime/healthz").status_code == 200
        bare = client.get("/duetime", follow_redirects=False)
        assert bare.status_code in {307, 308}
        assert bare.headers["location"].endswith("/duetime/")  # relative links resolve below it
        page = client.get("/duetime/")
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        assert client.get("/duetime/static/app.js").status_code == 200
        assert client.get("/duetime/static/style.css").status_code == 200
        docs = client.get("/duetime/docs").text
        assert "'/duetime/openapi.json'" in docs
        assert '"/duetime/docs-assets/swagger-ui-bundle.js"' in docs
        assert client.get("/duetime/docs-assets/swagger-ui-bundle.js").status_code == 200
        assert client.get("/duetime/openapi.json").json()["servers"] == [{"url": "/duetime"}]
        got = client.get("/duetime/v1/namespaces/default/timers/signup").json()
        assert got["timer"]["status"] == "done"
    # stopped with the parent: the store is closed, and a new start opens it again
    with TestClient(parent, base_url=LOCAL) as client:
        assert client.get("/duetime/healthz").status_code == 200
        assert len(started) == 2


def test_behind_a_proxy_root_path_every_link_carries_it(tmp_path: Path) -> None:
    """The proxy serves the app at /shop and strips it; uvicorn --root-path /shop puts it back
    in front of the path, as the ASGI scope says (the client below sends what uvicorn makes)."""
    parent = FastAPI()
    mount(parent, "/duetime/", app=make_app(tmp_path, []))
    with TestClient(parent, base_url=LOCAL, root_path="/shop") as client:
        bare = client.get("/shop/duetime", follow_redirects=False)
        assert bare.headers["location"].endswith("/shop/duetime/")
        assert client.get("/shop/duetime/").status_code == 200
        assert client.get("/shop/duetime/static/app.js").status_code == 200
        docs = client.get("/shop/duetime/docs").text
        assert "'/shop/duetime/openapi.json'" in docs
        assert '"/shop/duetime/docs-assets/swagger-ui.css"' in docs
        spec = client.get("/shop/duetime/openapi.json").json()
        assert spec["servers"] == [{"url": "/shop/duetime"}]
        made = client.post(
            "/shop/duetime/v1/namespaces/default/timers",
            json={"type": "greet", "delay": "P1D", "key": "later"},
        )
        assert made.status_code == 201, made.text


def test_plain_starlette_with_its_own_lifespan_state(tmp_path: Path) -> None:
    fired: list[Any] = []
    dt = make_app(tmp_path, fired)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[dict[str, str]]:
        yield {"greeting": "hello"}

    async def home(request: Any) -> JSONResponse:
        timer = (await dt.schedule("greet", {"n": 1}, key="home", delay=0)).timer
        return JSONResponse({"state": request.state.greeting, "key": timer.key})

    parent = Starlette(routes=[Route("/", home)], lifespan=lifespan)
    mount(parent, "/admin/duetime", app=dt, worker=True)
    with TestClient(parent, base_url=LOCAL) as client:
        assert client.get("/").json() == {"state": "hello", "key": "home"}  # state passed through
        wait_until(lambda: fired == [{"n": 1}], 20, "the handler to run")
        assert client.get("/admin/duetime/v1/info").status_code == 200


def test_without_the_lifespan_the_api_is_unavailable_until_the_user_enters_it(
    tmp_path: Path,
) -> None:
    dt = make_app(tmp_path, [])
    plain = FastAPI()
    mount(plain, app=dt, lifespan=False)
    with TestClient(plain, base_url=LOCAL) as client:  # what a bare Starlette mount does
        answer = client.get("/duetime/v1/namespaces")
        assert answer.status_code == 503
        assert answer.json()["code"] == "store_unavailable"

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with embedded.lifespan():
            yield

    parent = FastAPI(lifespan=lifespan)
    embedded = mount(parent, app=dt, lifespan=False)
    with TestClient(parent, base_url=LOCAL) as client:
        assert client.get("/duetime/v1/namespaces").json() == {
            "items": ["default"],
            "next_cursor": None,
        }


def test_the_lifespan_is_entered_once(tmp_path: Path) -> None:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with embedded.lifespan():  # and mount() composed it already
            yield

    parent = FastAPI(lifespan=lifespan)
    embedded = mount(parent, app=make_app(tmp_path, []))
    with pytest.raises(RuntimeError, match="running already"), TestClient(parent):
        pass


def test_without_worker_nothing_runs_here(tmp_path: Path) -> None:
    fired: list[Any] = []
    dt = make_app(tmp_path, fired)
    parent = FastAPI()
    mount(parent, app=dt)
    with TestClient(parent, base_url=LOCAL) as client:
        client.post(
            "/duetime/v1/namespaces/default/timers",
            json={"type": "greet", "key": "now", "delay": "PT0S"},
        )
        nodes = client.get("/duetime/v1/nodes").json()["items"]
        assert [node["role"] for node in nodes if node["alive"]] == ["api"]
        assert (
            client.get("/duetime/v1/namespaces/default/timers/now").json()["timer"]["status"]
            == "scheduled"
        )
    assert fired == []


def test_a_blocking_app_gets_its_worker_on_the_servers_loop(tmp_path: Path) -> None:
    fired: list[Any] = []
    dt = duetime.App(f"sqlite:///{tmp_path / 'sync.db'}")

    @dt.handler("greet")
    def greet(event: duetime.Event) -> None:
        fired.append(event.payload)

    with dt:
        dt.schedule("greet", {"from": "sync"}, key="sync", delay=0)
        parent = FastAPI()
        mount(parent, app=dt, worker=True)
        with TestClient(parent, base_url=LOCAL):
            wait_until(lambda: fired == [{"from": "sync"}], 20, "the sync handler to run")
        assert dt.get("sync").status == duetime.Status.DONE


def test_host_checks_and_auth(tmp_path: Path) -> None:
    parent = FastAPI()
    mount(parent, "/local", app=f"sqlite:///{tmp_path / 'a.db'}")
    mount(parent, "/any", app=f"sqlite:///{tmp_path / 'b.db'}", allowed_hosts=None)
    mount(parent, "/named", app=f"sqlite:///{tmp_path / 'c.db'}", allowed_hosts=["shop.example"])
    mount(parent, "/secured", app=f"sqlite:///{tmp_path / 'd.db'}", auth=True)
    with TestClient(parent, base_url="http://shop.example") as client:
        refused = client.get("/local/v1/namespaces")
        assert refused.status_code == 400
        assert refused.json()["field"] == "host"
        assert client.get("/any/v1/namespaces").status_code == 200
        assert client.get("/named/v1/namespaces").status_code == 200
        cross_site = client.post(
            "/named/v1/namespaces", json={"name": "x"}, headers={"origin": "https://evil.example"}
        )
        assert cross_site.status_code == 403
        assert client.get("/secured/v1/namespaces").status_code == 401
        assert client.get("/secured/v1/info").json()["auth"] is True


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"path": "duetime"}, "path"),
        ({"path": "/"}, "path"),
        ({"path": "/a b"}, "path"),
        ({"app": 42}, "app"),
        ({"app": "sqlite:///x.db", "worker": True}, "worker"),
        ({"worker": True}, "worker"),
    ],
)
def test_bad_arguments_name_the_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(duetime.InvalidInput) as raised:
        mount(FastAPI(), **kwargs)
    assert raised.value.field == field


def test_every_link_of_the_dashboard_page_resolves_below_the_prefix(tmp_path: Path) -> None:
    parent = FastAPI()
    mount(parent, "/ops/duetime", app=make_app(tmp_path, []))
    with TestClient(parent, base_url=LOCAL) as client:
        page = client.get("/ops/duetime/")
        links = [
            link
            for link in re.findall(r'(?:href|src)="([^"#]+)"', page.text)
            if not link.startswith("data:")  # inline (the empty favicon): no request at all
        ]
        assert links
        for link in links:
            url = urljoin(f"{LOCAL}/ops/duetime/", link)
            assert url.startswith(f"{LOCAL}/ops/duetime/"), f"{link} leaves the prefix"
            assert client.get(url).status_code == 200, link


def test_shutdown_lets_the_in_flight_handler_finish(tmp_path: Path) -> None:
    dt = duetime.AsyncApp(f"sqlite:///{tmp_path / 'slow.db'}")
    finished: list[str] = []

    @dt.handler("slow")
    async def slow(event: duetime.Event) -> None:
        await asyncio.sleep(0.5)
        finished.append(event.key)

    parent = FastAPI()
    mount(parent, app=dt, worker=True)
    with TestClient(parent, base_url=LOCAL) as client:
        client.post("/duetime/v1/namespaces/default/events", json={"type": "slow", "key": "s"})

        def running() -> bool:
            got = client.get("/duetime/v1/namespaces/default/timers/s").json()
            return bool(got["timer"]["status"] == "running")

        wait_until(running, 20, "the slow handler to start")
    assert finished == ["s"]  # the parent's shutdown waited for it
    parent = FastAPI()
    mount(parent, app=dt)
    with TestClient(parent, base_url=LOCAL) as client:
        assert client.get("/duetime/v1/namespaces/default/timers/s").json()["timer"]["status"] == (
            "done"
        )
