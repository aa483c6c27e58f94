"""Caps on what a tenant can create: namespaces, tokens, schedules, routes (limit rules: see
test_limits_interfaces). Each is a setting; one more than it allows is refused naming the field,
in Python (CapReached, an InvalidInput), over REST (422 ``cap_reached`` with the ``limit``) and
on the command line, and nothing is stored."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from duetime import App, AsyncApp
from duetime.api import ApiSettings, create_api
from duetime.config import Settings
from duetime.destinations.webhook import WebhookDestination
from duetime.errors import CapReached, InvalidInput

from .conftest import Cli


def settings(tmp_path: Path, **caps: int) -> Settings:
    return Settings(database_url=f"sqlite:///{tmp_path / 'caps.db'}", **caps)


def test_namespaces_are_capped_in_python_rest_and_the_cli(tmp_path: Path, cli: Cli) -> None:
    capped = settings(tmp_path, max_namespaces=3)  # 'default' is one

    async def python() -> None:
        async with AsyncApp(settings=capped) as app:
            assert await app.namespaces.add("a")
            assert await app.namespaces.add("b")
            with pytest.raises(CapReached) as raised:
                await app.namespaces.add("c")
            assert raised.value.field == "name"
            assert not await app.namespaces.add("a")  # an existing one is no new one
            assert await app.namespaces.list() == ["a", "b", "default"]

    asyncio.run(python())
    with TestClient(create_api(ApiSettings(core=capped))) as client:
        refused = client.post("/v1/namespaces", json={"name": "c"})
        assert refused.status_code == 422, refused.text
        body = refused.json()
        assert (body["code"], body["field"], body["limit"]) == ("cap_reached", "name", 3)
        assert "max_namespaces" in body["message"]
        assert client.post("/v1/namespaces", json={"name": "a"}).status_code == 200
    env = {"DUETIME_MAX_NAMESPACES": "1"}  # a fresh database: no namespace yet
    cli.ok("namespaces", "create", "x", env=env)
    error = cli.fails("namespaces", "create", "y", code=2, env=env)
    assert (error["code"], error["field"]) == ("cap_reached", "name"), error


def test_tokens_are_capped_and_the_namespaces_they_create_count(tmp_path: Path, cli: Cli) -> None:
    capped = settings(tmp_path, max_tokens=2, max_namespaces=2)

    async def python() -> None:
        async with AsyncApp(settings=capped) as app:
            first = await app.tokens.issue(["default"])
            await app.tokens.issue(["*"])
            with pytest.raises(CapReached) as raised:
                await app.tokens.issue(["default"])
            assert raised.value.field == "token"
            await app.tokens.revoke(first.info.id)  # a revoked token leaves room
            with pytest.raises(CapReached) as too_many:
                await app.tokens.issue(["one", "two"])  # two new namespaces: three in all
            assert too_many.value.field == "namespace"
            assert await app.namespaces.list() == ["default"]
            await app.tokens.issue(["one"])

    asyncio.run(python())
    env = {"DUETIME_MAX_TOKENS": "1"}
    cli.ok("tokens", "create", "--namespace", "default", env=env)
    error = cli.fails("tokens", "create", "--namespace", "default", code=2, env=env)
    assert (error["code"], error["field"]) == ("cap_reached", "token"), error


def test_schedules_are_capped_per_namespace(tmp_path: Path) -> None:
    capped = settings(tmp_path, max_schedules=2)
    with App(settings=capped) as app:
        app.schedules.add("a", "tick", every="PT1H")
        app.schedules.add("b", "tick", every="PT1H")
        with pytest.raises(CapReached) as raised:
            app.schedules.add("c", "tick", every="PT1H")
        assert raised.value.field == "name"
        action, _ = app.schedules.add("a", "tock", every="PT1H")  # changing one is allowed
        assert action == "updated"
        assert [s.name for s in app.schedules.list().items] == ["a", "b"]
    with TestClient(create_api(ApiSettings(core=capped))) as client:
        body = {"name": "c", "type": "tick", "every": "PT1H"}
        refused = client.post("/v1/namespaces/default/schedules", json=body)
        assert refused.status_code == 422, refused.text
        assert (refused.json()["code"], refused.json()["limit"]) == ("cap_reached", 2)
        client.delete("/v1/namespaces/default/schedules/b")
        assert client.post("/v1/namespaces/default/schedules", json=body).status_code == 201


def test_routes_are_capped_per_app(tmp_path: Path) -> None:
    app = App(settings=settings(tmp_path, max_routes=2))
    hook = WebhookDestination("hook", "http://127.0.0.1:9/hook")
    app.route("a.*", to=hook)
    app.route("b.*", to="hook")
    with pytest.raises(CapReached) as raised:
        app.route("c.*", to="hook")
    assert raised.value.field == "type"
    assert len(app.core.routes) == 2


def test_a_cap_must_be_a_positive_whole_number(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput) as raised:
        Settings.from_env({"DUETIME_MAX_LIMITS": "0"})
    assert raised.value.field == "max_limits"
    with pytest.raises(InvalidInput) as bad:
        Settings.from_env({"DUETIME_MAX_SCHEDULES": "many"})
    assert bad.value.field == "DUETIME_MAX_SCHEDULES"
