"""The REST API over HTTP against a real ``duetime serve``: the follow-up flows, idempotency, auth.

A serverless per-user task scheduler in REST terms: schedule a task for user 1234
15 days after a purchase, by date or delay and in the user's timezone; list a user's tasks
including executed ones; cancel only what is still scheduled.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest

from .test_api_serve import Server, make_server, wait_for

NS = "/v1/namespaces/shop"


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """Auth off, with a worker running the handlers of ``handlers:app`` (namespace shop)."""
    server = make_server(tmp_path_factory.mktemp("shop"))
    server.start("--app", "handlers:app")
    yield server
    assert server.stop() == 0, server.log()


@pytest.fixture
def client(shop: Server) -> Iterator[httpx.Client]:
    with shop.client() as client:
        yield client


def status_of(client: httpx.Client, key: str, namespace: str = NS) -> str:
    status: str = client.get(f"{namespace}/timers/{key}").json()["timer"]["status"]
    return status


# -- follow-up tasks ------------------------------------------------------------------------
def test_schedule_a_task_15_days_after_purchase_by_date_in_the_users_zone(
    client: httpx.Client,
) -> None:
    purchase = date(2031, 3, 20)
    body = {
        "type": "followup.email",
        "subject": "1234",
        "key": "order-77:followup",
        "date": (purchase + timedelta(days=15)).isoformat(),
        "timezone": "Europe/Berlin",
        "payload": {"template": "follow-up", "order": 77},
    }
    answer = client.post(f"{NS}/timers", json=body)
    assert answer.status_code == 201, answer.text
    timer = answer.json()["timer"]
    assert answer.json()["action"] == "created"
    midnight = datetime(2031, 4, 4, tzinfo=ZoneInfo("Europe/Berlin"))  # CEST from 30 March
    assert timer["due_at"] == midnight.astimezone(UTC).isoformat().replace("+00:00", "Z")
    assert timer["due_at"] == "2031-04-03T22:00:00Z"
    assert (timer["local"], timer["timezone"]) == ("2031-04-04T00:00:00", "Europe/Berlin")
    assert timer["status"] == "scheduled"
    assert timer["payload"] == {"template": "follow-up", "order": 77}


def test_schedule_a_task_with_a_calendar_delay_in_the_users_zone(client: httpx.Client) -> None:
    before = datetime.now(UTC)
    body = {"type": "followup.email", "subject": 1234, "delay": "P15D", "timezone": "Asia/Tokyo"}
    answer = client.post(f"{NS}/timers", json=body)
    assert answer.status_code == 201, answer.text
    timer = answer.json()["timer"]
    due_at = datetime.fromisoformat(timer["due_at"])
    assert before + timedelta(days=15) <= due_at <= datetime.now(UTC) + timedelta(days=15)
    assert timer["subject"] == "1234"
    assert len(timer["key"]) >= 16  # generated


def test_list_a_users_tasks_including_executed_ones_and_cancel_only_scheduled(
    shop: Server, client: httpx.Client
) -> None:
    subject = "user-1234-history"
    later = {"type": "followup.email", "subject": subject, "key": "h-later", "delay": "P15D"}
    soon = {"type": "followup.email", "subject": subject, "key": "h-soon", "delay": 0.2}
    other = {"type": "followup.email", "subject": "someone-else", "key": "h-other", "delay": "P1D"}
    for body in (later, soon, other):
        assert client.post(f"{NS}/timers", json=body).status_code == 201
    wait_for(lambda: status_of(client, "h-soon") == "done")
    assert "h-soon" in shop.fired()

    listed = client.get(f"{NS}/timers", params={"subject": subject}).json()
    assert [t["key"] for t in listed["items"]] == ["h-soon", "h-later"]  # newest first
    assert [t["status"] for t in listed["items"]] == ["done", "scheduled"]
    assert listed["next_cursor"] is None

    detail = client.get(f"{NS}/timers/h-soon").json()
    assert detail["timer"]["fired_at"] is not None
    assert [a["outcome"] for a in detail["attempts"]] == ["done"]

    cancelled = client.delete(f"{NS}/timers/h-later")
    assert cancelled.status_code == 200
    assert cancelled.json()["action"] == "cancelled"
    assert cancelled.json()["timer"]["status"] == "cancelled"

    unknown = client.delete(f"{NS}/timers/no-such-key")
    assert unknown.status_code == 404
    assert unknown.json() | {"message": ""} == {"code": "not_found", "message": "", "field": "key"}

    done_only = client.get(f"{NS}/timers", params={"subject": subject, "status": "done"})
    assert [t["key"] for t in done_only.json()["items"]] == ["h-soon"]

    # A finished timer is deleted (the one just cancelled too) by a purge; then it is gone.
    for key, status in (("h-soon", "done"), ("h-later", "cancelled")):
        deleted = client.post(f"{NS}/timers/{key}/purge")
        assert deleted.status_code == 200
        assert (deleted.json()["action"], deleted.json()["timer"]["status"]) == ("deleted", status)
        assert client.get(f"{NS}/timers/{key}").status_code == 404


# -- idempotency, events, dead letters -------------------------------------------------------
def test_same_key_twice_creates_then_updates_and_keep_keeps(client: httpx.Client) -> None:
    body: dict[str, Any] = {"type": "followup.email", "key": "idem-1", "delay": "P2D"}
    first = client.post(f"{NS}/timers", json={**body, "payload": {"n": 1}})
    assert (first.status_code, first.json()["action"]) == (201, "created")
    second = client.post(f"{NS}/timers", json={**body, "payload": {"n": 2}})
    assert (second.status_code, second.json()["action"]) == (200, "updated")
    assert second.json()["timer"]["payload"] == {"n": 2}
    kept = client.post(f"{NS}/timers", json={**body, "payload": {"n": 3}, "on_conflict": "keep"})
    assert (kept.status_code, kept.json()["action"]) == (200, "kept")
    assert kept.json()["timer"]["payload"] == {"n": 2}
    refused = client.post(f"{NS}/timers", json={**body, "on_conflict": "error"})
    assert refused.status_code == 409
    assert refused.json()["code"] == "already_exists"
    assert first.json()["timer"]["id"] == kept.json()["timer"]["id"]


def test_a_fired_timer_is_kept_not_updated_and_its_delete_frees_the_key(
    client: httpx.Client,
) -> None:
    body = {"type": "followup.email", "key": "fired-1", "delay": 0.2, "payload": {"v": 1}}
    assert client.post(f"{NS}/timers", json=body).status_code == 201
    wait_for(lambda: status_of(client, "fired-1") == "done")
    again = client.post(f"{NS}/timers", json={**body, "payload": {"v": 2}})
    assert (again.status_code, again.json()["action"]) == (200, "kept")
    assert again.json()["timer"]["payload"] == {"v": 1}
    assert client.delete(f"{NS}/timers/fired-1").status_code == 409  # a cancel: it has fired
    deleted = client.post(f"{NS}/timers/fired-1/purge")
    assert (deleted.status_code, deleted.json()["action"]) == (200, "deleted")
    anew = client.post(f"{NS}/timers", json={**body, "delay": 3600, "payload": {"v": 3}})
    assert (anew.status_code, anew.json()["action"]) == (201, "created")
    assert anew.json()["timer"]["id"] > deleted.json()["timer"]["id"]


def test_emit_fires_now_and_an_existing_key_is_kept(shop: Server, client: httpx.Client) -> None:
    body = {"type": "followup.email", "key": "emit-1", "payload": {"x": 1}}
    created = client.post(f"{NS}/events", json=body)
    assert (created.status_code, created.json()["action"]) == (201, "created")
    wait_for(lambda: "emit-1" in shop.fired())
    kept = client.post(f"{NS}/events", json={**body, "payload": {"x": 2}})
    assert (kept.status_code, kept.json()["action"]) == (200, "kept")
    unknown = client.post(f"{NS}/events", json={**body, "delay": 5})
    assert unknown.status_code == 422
    assert unknown.json()["field"] == "delay"


def test_priority_round_trips_through_schedule_emit_and_show(client: httpx.Client) -> None:
    body = {"type": "followup.email", "key": "prio-1", "delay": "P2D", "priority": 7}
    created = client.post(f"{NS}/timers", json=body)
    assert (created.status_code, created.json()["timer"]["priority"]) == (201, 7)
    assert client.get(f"{NS}/timers/prio-1").json()["timer"]["priority"] == 7
    normal = client.post(f"{NS}/timers", json={**body, "key": "prio-0"}).json()
    assert normal["timer"]["priority"] == 7
    default = client.post(f"{NS}/timers", json={"type": "followup.email", "delay": "P2D"})
    assert default.json()["timer"]["priority"] == 0
    emitted = client.post(f"{NS}/events", json={"type": "never.handled", "priority": 9})
    assert (emitted.status_code, emitted.json()["timer"]["priority"]) == (201, 9)
    refused = client.post(f"{NS}/events", json={"type": "x", "priority": 10})
    assert (refused.status_code, refused.json()["field"]) == (422, "priority")


def test_dead_letters_are_listed_and_replayed(client: httpx.Client) -> None:
    assert client.post(f"{NS}/events", json={"type": "doomed", "key": "dead-1"}).status_code == 201
    wait_for(lambda: status_of(client, "dead-1") == "dead")
    dead = client.get(f"{NS}/dead").json()["items"]
    assert "dead-1" in [t["key"] for t in dead]
    assert "never works" in next(t for t in dead if t["key"] == "dead-1")["last_error"]

    replayed = client.post(f"{NS}/dead/dead-1/replay")
    assert replayed.status_code == 200, replayed.text
    assert replayed.json()["action"] == "replayed"
    assert replayed.json()["timer"]["status"] == "scheduled"
    wait_for(lambda: status_of(client, "dead-1") == "dead")  # the handler still refuses
    attempts = client.get(f"{NS}/timers/dead-1").json()["attempts"]
    assert [a["outcome"] for a in attempts] == ["dead", "dead"]

    assert client.post(f"{NS}/timers", json={"type": "x", "key": "alive-1", "delay": "P1D"})
    not_dead = client.post(f"{NS}/dead/alive-1/replay")
    assert not_dead.status_code == 409
    assert client.post(f"{NS}/dead/nobody/replay").status_code == 404


def test_pages_newest_first_without_duplicates(client: httpx.Client) -> None:
    keys = [f"page-{n}" for n in range(5)]
    for key in keys:
        body = {"type": "page.test", "key": key, "delay": "P3D", "subject": "pager"}
        assert client.post(f"{NS}/timers", json=body).status_code == 201
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"subject": "pager", "limit": 2}
        if cursor:
            params["cursor"] = cursor
        page = client.get(f"{NS}/timers", params=params).json()
        seen += [t["key"] for t in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == list(reversed(keys))
    by_type = client.get(f"{NS}/timers", params={"type": "page.test", "limit": 100}).json()
    assert len(by_type["items"]) == 5


def test_stats_and_metrics_report_what_the_worker_did(client: httpx.Client) -> None:
    assert client.post(f"{NS}/events", json={"type": "followup.email", "key": "m-1"})
    wait_for(lambda: status_of(client, "m-1") == "done")
    assert client.post(f"{NS}/timers", json={"type": "x", "key": "m-2", "delay": "PT1H"})
    stats = client.get(f"{NS}/stats").json()
    assert stats["counts"]["done"] >= 1
    assert stats["counts"]["scheduled"] >= 1
    assert set(stats["counts"]) == {
        *("scheduled", "running", "retrying", "done", "dead", "cancelled", "expired")
    }
    run_ats = [t["run_at"] for t in stats["next_due"]]
    assert run_ats == sorted(run_ats)
    assert stats["lateness"]["count"] >= 1
    assert stats["lateness"]["buckets"][-1]["le"] is None
    alone = client.get(f"{NS}/counts").json()  # the counts apart, as the console asks them
    assert alone["namespace"] == "shop"
    assert set(alone["counts"]) == set(stats["counts"])
    assert alone["counts"]["scheduled"] >= 1
    uncounted = client.get(f"{NS}/stats", params={"counts": "false"}).json()
    assert uncounted["counts"] == {}
    assert [t["key"] for t in uncounted["next_due"]][:1] == [t["key"] for t in stats["next_due"]][
        :1
    ]

    text = client.get("/metrics").text
    assert 'duetime_attempts_started_total{namespace="shop",type="followup.email"}' in text
    assert 'duetime_attempts_total{namespace="shop",outcome="done",type="followup.email"}' in text
    assert 'duetime_oldest_overdue_seconds{namespace="shop"}' in text
    assert 'duetime_lateness_seconds_bucket{le="0.001",namespace="shop"' in text
    assert 'duetime_claim_batch_size_count{namespace="shop"}' in text
    assert 'duetime_claim_duration_seconds_count{namespace="shop"}' in text
    assert 'duetime_pending_timers{namespace="shop"}' in text
    assert 'duetime_dead_timers{namespace="shop"}' in text

    nodes = client.get("/v1/nodes").json()["items"]
    assert sorted(node["role"] for node in nodes) == ["api", "worker"]
    assert all(node["alive"] for node in nodes)


def test_a_write_never_creates_a_namespace_post_v1_namespaces_does(client: httpx.Client) -> None:
    assert client.get("/v1/namespaces/fresh/timers").status_code == 404
    typo = client.post("/v1/namespaces/fresh/timers", json={"type": "x", "delay": "P1D"})
    assert typo.status_code == 404
    assert (typo.json()["code"], typo.json()["field"]) == ("unknown_namespace", "namespace")
    for path in ("events", "schedules"):
        refused = client.post(f"/v1/namespaces/fresh/{path}", json={"type": "x"})
        assert (refused.status_code, refused.json()["code"]) == (404, "unknown_namespace")
    assert "fresh" not in client.get("/v1/namespaces").json()["items"]

    bad = client.post("/v1/namespaces", json={"name": "Not A Name"})
    assert (bad.status_code, bad.json()["field"]) == (422, "name")
    assert client.post("/v1/namespaces", json={"nom": "fresh"}).json()["field"] == "name"
    created = client.post("/v1/namespaces", json={"name": "fresh"})
    assert (created.status_code, created.json()) == (201, {"name": "fresh", "created": True})
    again = client.post("/v1/namespaces", json={"name": "fresh"})
    assert (again.status_code, again.json()["created"]) == (200, False)
    assert "fresh" in client.get("/v1/namespaces").json()["items"]

    made = client.post("/v1/namespaces/fresh/timers", json={"type": "x", "delay": "P1D"})
    assert made.status_code == 201
    assert client.get("/v1/namespaces/fresh/timers").json()["items"][0]["namespace"] == "fresh"


def test_the_default_namespace_needs_no_creating(client: httpx.Client) -> None:
    made = client.post("/v1/namespaces/default/timers", json={"type": "x", "delay": "P1D"})
    assert made.status_code == 201


def test_the_api_reference_needs_no_internet(client: httpx.Client) -> None:
    """/docs is Swagger UI served from this server: a machine offline still shows it."""
    page = client.get("/docs")
    assert page.status_code == 200
    assert "cdn." not in page.text
    assert "jsdelivr" not in page.text
    for asset in ("/docs-assets/swagger-ui-bundle.js", "/docs-assets/swagger-ui.css"):
        assert f'"{asset}"' in page.text or f"'{asset}'" in page.text
        served = client.get(asset)
        assert served.status_code == 200, asset
        assert len(served.content) > 10_000, asset
    assert '"/openapi.json"' in page.text or "'/openapi.json'" in page.text
