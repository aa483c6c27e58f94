"""The REST API's JSON answers never carry a terminal control raw: a payload or key holding DEL,
C1 controls or U+2028 comes back as ``\\u`` escapes, the same document to a JSON parser."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from duetime.api import ApiSettings, create_api
from duetime.config import Settings

HOSTILE = "\x1b]0;pwned\x07\x9b31m\x85\u2028\u2029\x7fend"
"""An OSC title (ESC and BEL, which JSON escapes itself), C1 CSI and NEL, line and paragraph
separators, DEL."""
RAW = ("\x9b", "\x85", "\u2028", "\u2029", "\x7f")
"""What JSON would leave raw inside a string."""


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    api = create_api(ApiSettings(core=Settings(database_url=f"sqlite:///{tmp_path / 'c.db'}")))
    with TestClient(api) as client:
        assert client.post("/v1/namespaces", json={"name": "default"}).status_code < 300
        yield client


def _no_raw(body: bytes) -> None:
    text = body.decode("utf-8")
    assert not [char for char in RAW if char in text], text


def test_a_timer_payload_comes_back_escaped_and_equal(client: TestClient) -> None:
    created = client.post(
        "/v1/namespaces/default/timers",
        json={"type": "t", "key": "k1", "delay": 3600, "payload": {"note": HOSTILE}},
    )
    assert created.status_code == 201, created.text
    _no_raw(created.content)
    shown = client.get("/v1/namespaces/default/timers/k1")
    assert shown.status_code == 200
    _no_raw(shown.content)
    assert shown.json()["timer"]["payload"] == {"note": HOSTILE}  # the same document
    listed = client.get("/v1/namespaces/default/timers")
    _no_raw(listed.content)
    assert listed.json()["items"][0]["key"] == "k1"


def test_an_error_naming_a_hostile_value_is_escaped(client: TestClient) -> None:
    answer = client.get("/v1/namespaces/default/timers/" + "x\x85\u2028")
    assert answer.status_code in (404, 422)
    _no_raw(answer.content)
