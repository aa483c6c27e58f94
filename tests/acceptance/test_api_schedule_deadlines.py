"""Schedule deadlines over REST: defined, shown, changed and cleared; what the watch found shown
with the schedule; bad values refused (422) naming the field."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from starlette.exceptions import StarletteDeprecationWarning

from duetime import AsyncApp, FrozenClock
from duetime.api import ApiSettings, create_api
from duetime.config import Settings
from duetime.store import create_store

with warnings.catch_warnings():  # starlette deprecates its httpx-based client; it still works
    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from fastapi.testclient import TestClient

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
NS = "/v1/namespaces/shop"
PATH = f"{NS}/schedules/nightly-report"


@dataclass
class Api:
    client: TestClient
    clock: FrozenClock
    url: str


async def _namespace(url: str) -> None:
    store = create_store(url)
    await store.open()
    try:
        await store.ensure_namespace("shop", NOW)
    finally:
        await store.close()


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    url = f"sqlite:///{tmp_path / 'duetime.db'}"
    asyncio.run(_namespace(url))
    clock = FrozenClock(NOW)
    app = create_api(ApiSettings(core=Settings(database_url=url)), clock=clock)
    with TestClient(app) as client:
        yield Api(client, clock, url)


def report(**fields: Any) -> dict[str, Any]:
    return {"name": "nightly-report", "type": "report.build", "cron": "0 2 * * *", **fields}


async def _watch(url: str, clock: FrozenClock) -> int:
    async with AsyncApp(url, "shop", clock=clock) as app:
        return (await app.schedules.deadline_watch().tick()).missed


def test_a_deadline_is_defined_shown_changed_and_its_misses_shown(api: Api) -> None:
    made = api.client.post(
        f"{NS}/schedules", json=report(must_succeed_within="PT30M", pause_after_failures=3)
    )
    assert made.status_code == 201, made.text
    schedule = made.json()["schedule"]
    assert (schedule["must_succeed_within"], schedule["pause_after_failures"]) == (1800.0, 3)
    assert schedule["deadline"] is None  # not watched yet
    api.clock.set(datetime(2025, 3, 2, 2, 31, tzinfo=UTC))  # 02:00 never ran; 02:30 passed
    assert asyncio.run(_watch(api.url, api.clock)) == 1
    shown = api.client.get(PATH).json()["schedule"]
    assert shown["deadline"]["misses"] == 1
    assert shown["deadline"]["last_miss_reason"] == "not_created"
    assert shown["deadline"]["last_miss_at"] == "2025-03-02T02:00:00Z"
    listed = api.client.get(f"{NS}/schedules").json()["items"]
    assert listed[0]["deadline"]["misses"] == 1
    changed = api.client.patch(PATH, json={"must_succeed_within": 3600})
    assert changed.status_code == 200, changed.text
    assert changed.json()["schedule"]["must_succeed_within"] == 3600.0
    cleared = api.client.patch(PATH, json={"must_succeed_within": None})
    assert cleared.json()["schedule"]["must_succeed_within"] is None


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"must_succeed_within": "PT0.5S"}, "must_succeed_within"),
        ({"must_succeed_within": "half an hour"}, "must_succeed_within"),
        ({"must_succeed_within": 0}, "must_succeed_within"),
        ({"must_succeed_within": [60]}, "must_succeed_within"),
        ({"pause_after_failures": 0}, "pause_after_failures"),
        ({"pause_after_failures": -2}, "pause_after_failures"),
        ({"pause_after_failures": 1.5}, "pause_after_failures"),
        ({"pause_after_failures": "3"}, "pause_after_failures"),
    ],
)
def test_bad_deadline_settings_are_422_naming_the_field(
    api: Api, fields: dict[str, Any], field: str
) -> None:
    answer = api.client.post(f"{NS}/schedules", json=report(**fields))
    assert answer.status_code == 422, answer.text
    assert (answer.json()["code"], answer.json()["field"]) == ("invalid_input", field)
    made = api.client.post(f"{NS}/schedules", json=report())
    assert made.status_code == 201, made.text
    patched = api.client.patch(PATH, json=fields)
    assert patched.status_code == 422, patched.text
    assert patched.json()["field"] == field
