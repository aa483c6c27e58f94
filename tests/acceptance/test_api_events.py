"""The event log over REST, in process on both backends: emit with ``POST /events``, let the
worker deliver, read it back with ``GET /events`` by type and time — after archiving too.

Auth is on and the clock frozen; the worker runs in the API's lifespan as ``duetime serve``
runs it. Bad parameters are a 422 naming the parameter.
"""

from __future__ import annotations

import asyncio
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from starlette.exceptions import StarletteDeprecationWarning
from tests.waiting import poll

from duetime import AsyncApp, Dead, Event, FrozenClock, Retry
from duetime.api import ApiSettings, create_api
from duetime.config import Settings
from duetime.store import create_store
from duetime.tenancy.auth import issue_token

with warnings.catch_warnings():  # starlette deprecates its httpx-based client; it still works
    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from fastapi.testclient import TestClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from storekit import pooled_pg_url

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
NS = "/v1/namespaces/shop"


@dataclass
class Api:
    client: TestClient
    clock: FrozenClock
    tokens: dict[str, str]
    core: AsyncApp

    def get(self, path: str, who: str | None = "ro", **params: Any) -> Any:
        headers = {} if who is None else {"Authorization": f"Bearer {self.tokens[who]}"}
        return self.client.get(path, params=params, headers=headers)

    def emit(self, type: str, key: str) -> None:
        headers = {"Authorization": f"Bearer {self.tokens['rw']}"}
        answer = self.client.post(f"{NS}/events", json={"type": type, "key": key}, headers=headers)
        assert answer.status_code == 201, answer.text

    def events(self, **params: Any) -> dict[str, Any]:
        answer = self.get(f"{NS}/events", **params)
        assert answer.status_code == 200, answer.text
        page: dict[str, Any] = answer.json()
        return page

    def keys(self, **params: Any) -> list[str]:
        return [item["key"] for item in self.events(**params)["items"]]


async def _issue_tokens(url: str) -> dict[str, str]:
    store = create_store(url)
    await store.open()
    try:
        for namespace in ("shop", "other"):
            await store.ensure_namespace(namespace, NOW)
        tokens = store.tokens
        scopes = {"rw": (["shop"], False), "ro": (["shop"], True), "other": (["other"], False)}
        return {
            who: (await issue_token(tokens, ns, read_only=ro, name=who, now=NOW)).secret
            for who, (ns, ro) in scopes.items()
        }
    finally:
        await store.close()


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'duetime.db'}"
        return
    with pooled_pg_url() as url:
        yield url


@pytest.fixture
def api(database_url: str) -> Iterator[Api]:
    tokens = asyncio.run(_issue_tokens(database_url))
    clock = FrozenClock(NOW)
    settings = Settings(database_url=database_url, namespace="shop")
    store = create_store(database_url)
    core = AsyncApp(settings=settings, store=store, clock=clock)
    tries: dict[str, int] = {}

    @core.handler("order.paid")
    def paid(event: Event) -> None:
        tries[event.key] = tries.get(event.key, 0) + 1
        if tries[event.key] == 1:
            raise Retry("the ledger is busy", delay=0)

    @core.handler("order.refunded")
    def refunded(event: Event) -> None:
        raise Dead("refunds are closed")

    @core.handler("user.created")
    def created(event: Event) -> None:
        pass

    app = create_api(ApiSettings(core=settings), store=store, workers=[core], clock=clock)
    with TestClient(app) as client:
        yield Api(client, clock, tokens, core)


def settled(api: Api, count: int) -> list[dict[str, Any]]:
    """The log once ``count`` events are there and none is still being delivered."""
    seen: list[dict[str, Any]] = []

    def done() -> list[dict[str, Any]] | None:
        seen[:] = api.events()["items"]
        if len(seen) == count and all(i["status"] in ("done", "dead") for i in seen):
            return list(seen)
        return None

    return poll(done, 60, f"{count} events delivered", explain=seen.__str__)


def emit_three(api: Api) -> None:
    for minute, (type, key) in enumerate(
        [("order.paid", "o-1"), ("user.created", "u-1"), ("order.refunded", "o-2")]
    ):
        api.clock.set(NOW + timedelta(minutes=minute))
        api.emit(type, key)
        settled(api, minute + 1)


def test_emitted_events_are_listed_newest_first_with_their_deliveries(api: Api) -> None:
    emit_three(api)
    items = api.events()["items"]
    assert [i["key"] for i in items] == ["o-2", "u-1", "o-1"]
    assert [i["fired_at"] for i in items] == [
        "2025-03-01T12:02:00Z",
        "2025-03-01T12:01:00Z",
        "2025-03-01T12:00:00Z",
    ]
    deliveries = {i["key"]: [(d["number"], d["outcome"]) for d in i["deliveries"]] for i in items}
    assert deliveries == {
        "o-1": [(1, "retry"), (2, "done")],
        "u-1": [(1, "done")],
        "o-2": [(1, "dead")],
    }
    assert items[0]["deliveries"][0]["error"] == "refunds are closed"
    assert api.keys(type="order.*") == ["o-2", "o-1"]
    assert api.keys(type="user.created") == ["u-1"]
    assert api.keys(since="2025-03-01T12:01:00Z") == ["o-2", "u-1"]
    assert api.keys(since="PT30S") == ["o-2"]  # the clock says 12:02
    assert api.keys(until="2025-03-01T12:01:00Z", type="*") == ["o-1"]


def test_the_log_pages_with_a_cursor_and_keeps_archived_events(api: Api, database_url: str) -> None:
    emit_three(api)
    api.clock.advance(timedelta(hours=2))
    assert api.client.portal is not None
    report = api.client.portal.call(api.core.maintain)  # on the server's loop, as its worker does
    # PostgreSQL moves the two that are done to the history; the dead one stays, replayable.
    assert report.archived == (2 if database_url.startswith("postgresql") else 0)
    keys: list[str] = []
    cursor = None
    while True:
        page = api.events(limit=1, **({"cursor": cursor} if cursor else {}))
        keys += [item["key"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert keys == ["o-2", "u-1", "o-1"]
    assert api.events(type="order.*", since="PT3H")["items"][1]["deliveries"][1]["outcome"] == (
        "done"
    )


BAD: list[tuple[dict[str, Any], str]] = [
    ({"type": "order.["}, "type"),
    ({"type": "order.?"}, "type"),
    ({"type": "x" * 201}, "type"),
    ({"since": "yesterday"}, "since"),
    ({"since": "2025-03-01T12:00:00"}, "since"),
    ({"until": "P1X"}, "until"),
    ({"cursor": "bm90LWEtY3Vyc29y"}, "cursor"),
    ({"limit": 0}, "limit"),
    ({"limit": 1001}, "limit"),
]


def test_bad_parameters_are_a_422_naming_the_parameter(api: Api) -> None:
    for params, field in BAD:
        answer = api.get(f"{NS}/events", **params)
        assert answer.status_code == 422, (params, answer.text)
        assert answer.json()["code"] == "invalid_input"
        assert answer.json()["field"] == field, params


def test_a_window_that_ends_before_it_begins_lists_nothing(api: Api) -> None:
    # Each bound is valid alone; the document cannot relate them, so neither does the server.
    emit_three(api)
    answer = api.get(f"{NS}/events", since="PT1H", until="PT2H")
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"items": [], "next_cursor": None}


def test_only_readers_of_the_namespace_see_its_log(api: Api) -> None:
    emit_three(api)
    assert api.get(f"{NS}/events", who="ro").status_code == 200
    assert api.get(f"{NS}/events", who="other").status_code == 404
    assert api.get(f"{NS}/events", who=None).status_code == 401
    assert api.get("/v1/namespaces/nowhere/events", who="rw").status_code == 404
    document = api.client.get("/openapi.json").json()
    operation = document["paths"]["/v1/namespaces/{namespace}/events"]["get"]
    assert {p["name"] for p in operation["parameters"]} == {
        "namespace", "type", "since", "until", "cursor", "limit"
    }  # fmt: skip
    assert {"200", "401", "404", "422"} <= set(operation["responses"])
