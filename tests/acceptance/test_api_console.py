"""The operator's endpoints against a real ``duetime serve``, on SQLite and on PostgreSQL:
filtered and paginated listings, run now, bulk actions by filter, activity, nodes' clocks."""

from __future__ import annotations

import contextlib
import itertools
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from duetime import App, Dead, Event

from .test_api_serve import Server, make_server

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from storekit import PG_URL, pooled_schema, with_params

NS = "/v1/namespaces/shop"


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """A seeded server without workers: 5 dead ``order.paid``, 3 pending ``order.shipped`` due
    in 1-3 h (subject user-1), 2 pending ``mail.sent`` due in 2 days."""
    server = make_server(tmp_path_factory.mktemp(request.param))
    with contextlib.ExitStack() as schemas:
        if request.param == "postgres":
            schema = schemas.enter_context(pooled_schema())
            server.env["DUETIME_DATABASE_URL"] = with_params(PG_URL, schema=schema)
        seed(server.env["DUETIME_DATABASE_URL"])
        server.start("--no-worker")
        try:
            yield server
        finally:
            server.stop()


def seed(url: str) -> None:
    with App(database_url=url, namespace="shop") as app:

        @app.handler("order.paid")
        def refuse(event: Event) -> None:
            raise Dead(f"ledger refused order {event.payload['n']}")

        for n in range(5):
            app.schedule("order.paid", {"n": n}, delay=0, key=f"paid-{n}")
        app.tick()
        for n in range(3):
            app.schedule("order.shipped", {"n": n}, delay=f"PT{n + 1}H", key=f"ship-{n}",
                         subject="user-1")  # fmt: skip
        for n in range(2):
            app.schedule("mail.sent", {"n": n}, delay="P2D", key=f"mail-{n}")


@pytest.fixture
def client(server: Server) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


def keys(client: httpx.Client, **params: Any) -> list[str]:
    """Every key the listing returns, walking its pages."""
    found: list[str] = []
    cursor = None
    while True:
        page = client.get(
            f"{NS}/timers", params={**params, **({"cursor": cursor} if cursor else {})}
        )
        assert page.status_code == 200, page.text
        found += [t["key"] for t in page.json()["items"]]
        cursor = page.json()["next_cursor"]
        if cursor is None:
            return found


def error_field(answer: httpx.Response) -> str:
    assert answer.status_code == 422, answer.text
    field: str = answer.json()["field"]
    return field


def iso(instant: datetime) -> str:
    return instant.isoformat().replace("+00:00", "Z")


def test_filters_by_type_glob_status_subject_and_due_range(client: httpx.Client) -> None:
    assert sorted(keys(client, type="order.*")) == sorted(
        [f"paid-{n}" for n in range(5)] + [f"ship-{n}" for n in range(3)]
    )
    assert keys(client, type="order.paid", status="dead") == [
        f"paid-{n}" for n in reversed(range(5))
    ]
    assert keys(client, subject="user-1") == ["ship-2", "ship-1", "ship-0"]
    now = datetime.now(UTC)
    window = {
        "due_from": iso(now + timedelta(minutes=90)),
        "due_until": iso(now + timedelta(days=1)),
    }
    assert keys(client, **window) == ["ship-2", "ship-1"]
    assert keys(client, type="*.sent", due_from=iso(now)) == ["mail-1", "mail-0"]
    assert keys(client, type="nothing.*") == []


def test_pages_by_keyset_cursor_without_repeats(client: httpx.Client) -> None:
    walked = keys(client, status="dead", limit=2)
    assert walked == [f"paid-{n}" for n in reversed(range(5))]
    first = client.get(f"{NS}/timers", params={"status": "dead", "limit": 2}).json()
    assert len(first["items"]) == 2
    assert first["next_cursor"]


def test_bad_filters_name_their_field(client: httpx.Client) -> None:
    assert error_field(client.get(f"{NS}/timers", params={"type": "no spaces"})) == "type"
    assert error_field(client.get(f"{NS}/timers", params={"due_from": "yesterday"})) == "due_from"
    # A window that ends before it begins is no error (the document cannot relate the two
    # bounds): it takes nothing.
    inverted = {"due_from": "2030-01-02T00:00:00Z", "due_until": "2030-01-01T00:00:00Z"}
    assert client.get(f"{NS}/timers", params=inverted).json() == {"items": [], "next_cursor": None}
    assert error_field(client.get(f"{NS}/timers", params={"cursor": "garbage"})) == "cursor"
    bulk = f"{NS}/timers/bulk"
    assert error_field(client.post(bulk, json={"action": "explode"})) == "action"
    body = {"action": "cancel", "filter": {"colour": "red"}}
    assert error_field(client.post(bulk, json=body)) == "filter.colour"
    body = {"action": "cancel", "filter": {"type": 7}}
    assert error_field(client.post(bulk, json=body)) == "filter.type"
    assert error_field(client.post(bulk, json={"action": "cancel", "dry_run": "yes"})) == "dry_run"
    assert error_field(client.post(bulk, json={"action": "cancel", "wat": 1})) == "wat"


def test_run_now_makes_a_pending_timer_due_and_refuses_a_dead_one(client: httpx.Client) -> None:
    before = datetime.now(UTC) - timedelta(seconds=5)
    answer = client.post(f"{NS}/timers/ship-0/run-now")
    assert answer.status_code == 200, answer.text
    assert answer.json()["action"] == "made_due"
    run_at = datetime.fromisoformat(client.get(f"{NS}/timers/ship-0").json()["timer"]["run_at"])
    assert before <= run_at <= datetime.now(UTC) + timedelta(seconds=5)
    refused = client.post(f"{NS}/timers/paid-0/run-now")
    assert refused.status_code == 409
    assert "dead" in refused.json()["message"]
    assert client.post(f"{NS}/timers/nope/run-now").status_code == 404


def test_activity_counts_what_fired_per_minute_from_the_database(client: httpx.Client) -> None:
    answer = client.get(f"{NS}/activity", params={"minutes": 30})
    assert answer.status_code == 200, answer.text
    minutes = answer.json()["minutes"]
    assert len(minutes) == 30
    starts = [datetime.fromisoformat(m["start"]) for m in minutes]
    assert all(b - a == timedelta(minutes=1) for a, b in itertools.pairwise(starts))
    assert starts[-1] <= datetime.now(UTC) < starts[-1] + timedelta(minutes=1)
    busy = [m for m in minutes if m["fired"]]
    assert sum(m["fired"] for m in busy) == 5  # the five dead order.paid; pending ones never fired
    assert sum(m["by_status"].get("dead", 0) for m in busy) == 5
    assert all(m["lateness_max_ms"] is not None for m in busy)
    quiet = [m for m in minutes if not m["fired"]]
    assert all(m["lateness_mean_ms"] is None and m["by_status"] == {} for m in quiet)
    assert error_field(client.get(f"{NS}/activity", params={"minutes": 0})) == "minutes"


def test_dead_letters_by_type_with_the_newest_error(client: httpx.Client) -> None:
    answer = client.get(f"{NS}/dead/types")
    assert answer.status_code == 200, answer.text
    (group,) = answer.json()["items"]
    assert (group["type"], group["count"]) == ("order.paid", 5)
    assert group["newest_error"] == "ledger refused order 4"
    assert group["newest_at"] is not None
    assert error_field(client.get(f"{NS}/dead/types", params={"limit": 0})) == "limit"


def test_bulk_counts_first_then_acts_on_exactly_what_the_filter_takes(
    client: httpx.Client,
) -> None:
    bulk = f"{NS}/timers/bulk"
    dry = client.post(
        bulk, json={"action": "cancel", "filter": {"type": "mail.*"}, "dry_run": True}
    )
    assert dry.json() == {"action": "cancel", "dry_run": True, "count": 2}
    assert keys(client, status="cancelled") == []  # a dry run changes nothing
    done = client.post(bulk, json={"action": "cancel", "filter": {"type": "mail.*"}})
    assert done.json() == {"action": "cancel", "dry_run": False, "count": 2}
    assert sorted(keys(client, status="cancelled")) == ["mail-0", "mail-1"]
    # replay takes only dead timers, whatever else the filter matches
    dry = client.post(
        bulk, json={"action": "replay", "filter": {"type": "order.*"}, "dry_run": True}
    )
    assert dry.json()["count"] == 5
    done = client.post(bulk, json={"action": "replay", "filter": {"type": "order.*"}})
    assert done.json()["count"] == 5
    assert keys(client, status="dead") == []
    timer = client.get(f"{NS}/timers/paid-3").json()["timer"]
    assert (timer["status"], timer["max_attempts"] > timer["attempts"]) == ("scheduled", True)
    again = client.post(bulk, json={"action": "replay", "filter": {"type": "order.*"}})
    assert again.json()["count"] == 0


def next_event(lines: Iterator[str]) -> str:
    """The name of the next event on a server-sent event stream (comments skipped)."""
    for line in lines:
        if line.startswith("event: "):
            return line.removeprefix("event: ")
    raise AssertionError("the stream ended")


def test_live_stream_says_changed_after_a_write(server: Server) -> None:
    with server.client() as client, client.stream("GET", f"{NS}/live") as stream:
        assert stream.status_code == 200
        assert stream.headers["content-type"].startswith("text/event-stream")
        lines = stream.iter_lines()
        assert next(lines) == "retry: 2000"
        with server.client() as writer:
            body = {"type": "mail.sent", "key": "live-1", "delay": "PT1H"}
            assert writer.post(f"{NS}/timers", json=body).status_code == 201
        assert next_event(lines) == "changed"
    with server.client() as client:  # an unknown namespace is refused before any stream opens
        assert client.get("/v1/namespaces/nope/live").status_code == 404


@pytest.mark.slow
def test_an_open_live_stream_does_not_hold_up_shutdown(tmp_path: Path) -> None:
    server = make_server(tmp_path)
    server.start("--no-worker")
    try:
        with server.client() as client, client.stream("GET", "/v1/namespaces/default/live") as s:
            lines = s.iter_lines()
            assert next(lines) == "retry: 2000"
            # Well inside the 10 s grace uvicorn gives open requests: the stream ends at once.
            assert server.stop(timeout=8) == 0, server.log()
            assert list(lines) == [""]
    finally:
        server.stop()
