"""A listing page holds at most ``page_bytes`` of JSON (``DUETIME_PAGE_BYTES``) besides its
``limit`` of rows: a page of large payloads ends early with the cursor after its last item,
the next page starts there, and a walk meets every item once. Timers, dead letters, the event
log and the audit log, on both stores."""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from duetime import App, Dead, Event
from duetime.api import ApiSettings, create_api
from duetime.config import Settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from storekit import pooled_pg_url

NS = "/v1/namespaces/default"
BIG = 6_000
"""Characters of each payload's text: three fit in the budget below, four do not."""
BUDGET = 20_000
TIMERS = 10


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'pages.db'}"
        return
    with pooled_pg_url() as url:
        yield url


def seed(url: str) -> None:
    """Half the timers done, half dead, each with a large payload; then two pending."""
    with App(database_url=url) as app:

        @app.handler("big.ok")
        def ok(event: Event) -> None:
            return None

        @app.handler("big.dead")
        def refuse(event: Event) -> None:
            raise Dead("refused")

        for n in range(TIMERS):
            kind = "ok" if n % 2 else "dead"
            app.schedule(f"big.{kind}", {"n": n, "text": "x" * BIG}, delay=0, key=f"k{n:02}")
        while app.tick().claimed:
            pass
        for n in range(2):
            app.schedule("later", {"text": "y" * BIG}, delay="P1D", key=f"later-{n}")


def walk(client: TestClient, path: str, **params: Any) -> list[list[dict[str, Any]]]:
    """Every page of ``path`` (``limit=1000``), asking for the next while a cursor comes."""
    pages: list[list[dict[str, Any]]] = []
    cursor = None
    while True:
        query = {"limit": 1000, **params, **({} if cursor is None else {"cursor": cursor})}
        answer = client.get(path, params=query)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        pages.append(body["items"])
        cursor = body["next_cursor"]
        if cursor is None:
            return pages
        assert len(pages) <= 100, "the walk never ends"


def item_bytes(items: list[dict[str, Any]]) -> int:
    return sum(len(json.dumps(i, ensure_ascii=False, separators=(",", ":"))) + 1 for i in items)


def within_budget(pages: list[list[dict[str, Any]]]) -> None:
    """Each page holds what fits in the budget, and ends only where the next item would not."""
    for page, following in itertools.pairwise(pages):
        assert item_bytes(page) <= BUDGET
        assert item_bytes(page) + item_bytes(following[:1]) > BUDGET
    assert item_bytes(pages[-1]) <= BUDGET


def test_a_page_ends_at_its_byte_budget_with_its_cursor(database_url: str) -> None:
    seed(database_url)
    core = Settings(database_url=database_url, page_bytes=BUDGET)
    with TestClient(create_api(ApiSettings(core=core, auth=False))) as client:
        for sort in ("newest", "due"):
            pages = walk(client, f"{NS}/timers", sort=sort)
            keys = [t["key"] for page in pages for t in page]
            assert sorted(keys) == sorted(
                [f"k{n:02}" for n in range(TIMERS)] + ["later-0", "later-1"]
            )
            assert len(keys) == len(set(keys))
            assert len(pages) > 1, sort  # how many a page holds follows from the items' sizes:
            within_budget(pages)  # each page is as full as its budget allows, and no fuller
        dead = walk(client, f"{NS}/dead")
        assert len(dead) > 1  # how many a page holds follows from the items' sizes:
        within_budget(dead)  # each page is as full as its budget allows, and no fuller
        assert sorted(t["key"] for page in dead for t in page) == [
            f"k{n:02}" for n in range(0, TIMERS, 2)
        ]
        events = walk(client, f"{NS}/events")
        assert len(events) > 1
        within_budget(events)
        assert sorted(e["key"] for page in events for e in page) == [
            f"k{n:02}" for n in range(TIMERS)
        ]
        small = walk(client, f"{NS}/timers", type="later", limit=1)
        assert [len(page) for page in small] == [1, 1]  # the row limit still holds


def test_every_listing_walks_one_item_a_page_under_the_smallest_budget(database_url: str) -> None:
    """A budget smaller than any item: each page holds one, and the walk still meets them all."""
    seed(database_url)
    core = Settings(database_url=database_url, page_bytes=1)
    with TestClient(create_api(ApiSettings(core=core, auth=False))) as client:
        for key in ("later-0", "later-1"):  # two cancels, then a purge
            assert client.delete(f"{NS}/timers/{key}").status_code == 200
        assert client.post(f"{NS}/timers/later-0/purge").status_code == 200
        for path, count in (
            ("timers", TIMERS + 1),
            ("dead", TIMERS // 2),
            ("events", TIMERS),
            ("audit", 3),
        ):
            pages = walk(client, f"{NS}/{path}")
            assert [len(page) for page in pages] == [1] * count, path
