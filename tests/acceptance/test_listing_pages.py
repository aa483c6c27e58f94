"""Namespaces and tokens are listed a page at a time, like limit rules: ``limit`` and ``cursor``
in, ``next_cursor`` out (null on the last page), over REST (documented in /openapi.json) and on
the command line (``--limit``, ``--cursor``). A scoped token's pages hold only its namespaces."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from duetime import AsyncApp
from duetime.api import ApiSettings, create_api
from duetime.config import Settings

from .conftest import Cli

NAMES = ["default", "n1", "n2", "n3", "n4"]


def _made(tmp_path: Path) -> Settings:
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'pages.db'}")

    async def make() -> None:
        async with AsyncApp(settings=settings) as app:
            for name in NAMES[1:]:
                await app.namespaces.add(name)
            for _ in range(5):
                await app.tokens.issue(["*"])

    asyncio.run(make())
    return settings


def _walk(get: Any, path: str, limit: int, key: str = "items") -> list[Any]:
    pages: list[Any] = []
    cursor = None
    while True:
        body = get(path, limit, cursor)
        pages.append(body[key])
        cursor = body["next_cursor"]
        if cursor is None:
            return pages
        assert len(body[key]) == limit


def test_namespaces_are_paged_over_rest(tmp_path: Path) -> None:
    settings = _made(tmp_path)
    with TestClient(create_api(ApiSettings(core=settings, auth=False))) as client:

        def get(path: str, limit: int, cursor: str | None) -> Any:
            params: dict[str, Any] = {"limit": limit}
            if cursor is not None:
                params["cursor"] = cursor
            answer = client.get(path, params=params)
            assert answer.status_code == 200, answer.text
            return answer.json()

        assert _walk(get, "/v1/namespaces", 2) == [["default", "n1"], ["n2", "n3"], ["n4"]]
        assert client.get("/v1/namespaces").json() == {"items": NAMES, "next_cursor": None}
        for bad in ({"limit": 0}, {"limit": 1001}, {"cursor": "id.4"}, {"cursor": "name.!"}):
            answer = client.get("/v1/namespaces", params=bad)
            assert answer.status_code == 422, (bad, answer.text)
        document = client.get("/openapi.json").json()
        operation = document["paths"]["/v1/namespaces"]["get"]
        params = {p["name"]: p for p in operation["parameters"]}
        assert set(params) == {"limit", "cursor"}
        assert (params["limit"]["schema"]["minimum"], params["limit"]["schema"]["maximum"]) == (
            1,
            1000,
        )
        assert params["cursor"]["schema"]["anyOf"][0]["pattern"].startswith("^(?:name")
        out = document["components"]["schemas"]["NamespacesOut"]
        assert set(out["required"]) == {"items", "next_cursor"}


def test_a_scoped_tokens_pages_hold_only_its_namespaces(tmp_path: Path) -> None:
    settings = _made(tmp_path)

    async def scoped() -> str:
        async with AsyncApp(settings=settings) as app:
            return (await app.tokens.issue(["n4", "n1", "default"])).secret

    secret = asyncio.run(scoped())
    with TestClient(create_api(ApiSettings(core=settings))) as client:
        headers = {"Authorization": f"Bearer {secret}"}

        def get(path: str, limit: int, cursor: str | None) -> Any:
            params: dict[str, Any] = {"limit": limit, "cursor": cursor or ""}
            answer = client.get(path, params=params, headers=headers)
            assert answer.status_code == 200, answer.text
            return answer.json()

        assert _walk(get, "/v1/namespaces", 2) == [["default", "n1"], ["n4"]]


def test_namespaces_and_tokens_are_paged_on_the_cli(tmp_path: Path, cli: Cli) -> None:
    _made(Path(cli.db_path).parent)
    cli.env["DUETIME_DATABASE_URL"] = f"sqlite:///{Path(cli.db_path).parent / 'pages.db'}"

    def namespaces(path: str, limit: int, cursor: str | None) -> Any:
        extra = ["--cursor", cursor] if cursor else []
        return cli.ok("namespaces", "ls", "--limit", str(limit), *extra)

    def tokens(path: str, limit: int, cursor: str | None) -> Any:
        extra = ["--cursor", cursor] if cursor else []
        return cli.ok("tokens", "ls", "--limit", str(limit), *extra)

    pages = _walk(namespaces, "", 3, key="namespaces")
    assert pages == [["default", "n1", "n2"], ["n3", "n4"]]
    token_pages = _walk(tokens, "", 2)
    assert [len(page) for page in token_pages] == [2, 2, 1]
    ids = [token["id"] for page in token_pages for token in page]
    assert ids == sorted(ids)
    assert len(set(ids)) == 5
    more = cli("tokens", "ls", "--limit", "2")
    assert more.code == 0, more.stderr
    assert "more: pass --cursor token." in more.stdout, more.stdout
    refused = cli.fails("tokens", "ls", "--cursor", "name.n1", code=2)
    assert refused["field"] == "cursor", refused
