"""The ASGI path router that puts duetime's API beside Django: who gets which request."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from duetime.contrib.django.asgi import PrefixRouter, with_duetime


class Recorder:
    def __init__(self, name: str, calls: list[tuple[str, dict[str, Any]]]) -> None:
        self.name, self.calls = name, calls

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.calls.append((self.name, dict(scope)))


def route(scope: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    calls: list[tuple[str, dict[str, Any]]] = []
    router = PrefixRouter(Recorder("django", calls), "/duetime", Recorder("duetime", calls))

    async def nothing() -> dict[str, Any]:
        return {}

    async def ignore(message: Any) -> None:
        return None

    asyncio.run(router(scope, nothing, ignore))
    (call,) = calls
    return call


@pytest.mark.parametrize("path", ["/duetime", "/duetime/", "/duetime/v1/nodes"])
def test_paths_under_the_prefix_go_to_duetime_with_the_prefix_as_root_path(path: str) -> None:
    name, scope = route({"type": "http", "path": path, "root_path": ""})
    assert (name, scope["path"], scope["root_path"]) == ("duetime", path, "/duetime")


@pytest.mark.parametrize("path", ["/", "/orders/", "/duetimer", "/admin/duetime/"])
def test_every_other_path_goes_to_django_untouched(path: str) -> None:
    name, scope = route({"type": "http", "path": path, "root_path": ""})
    assert (name, scope["path"], scope["root_path"]) == ("django", path, "")


def test_behind_a_proxy_prefix_the_prefixes_add_up() -> None:
    name, scope = route({"type": "http", "path": "/shop/duetime/v1/nodes", "root_path": "/shop"})
    assert (name, scope["root_path"]) == ("duetime", "/shop/duetime")
    assert route({"type": "http", "path": "/shop/orders/", "root_path": "/shop"})[0] == "django"


def test_websockets_are_routed_alike_and_the_lifespan_goes_to_duetime_only() -> None:
    assert route({"type": "websocket", "path": "/duetime/x", "root_path": ""})[0] == "duetime"
    assert route({"type": "websocket", "path": "/ws/", "root_path": ""})[0] == "django"
    assert route({"type": "lifespan"})[0] == "duetime"  # Django's handler refuses lifespans


@pytest.mark.parametrize("prefix", ["duetime", "/duetime/", ""])
def test_a_prefix_must_be_a_path_without_a_trailing_slash(prefix: str) -> None:
    with pytest.raises(ValueError, match="prefix must start with '/'"):
        with_duetime(Recorder("django", []), prefix, api=Recorder("duetime", []))
