"""The REST schedules endpoints in process: define, list, show, change, pause, resume, delete,
preview — with auth on, a frozen clock, and bad input refused with the field to fix.

A birthday greeter in REST terms: "each user's birthday greeting at 09:00 in their zone" is one
schedule per user; its next occurrences are shown in UTC and in the user's local time, DST included.
"""

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

from duetime import FrozenClock
from duetime.api import ApiSettings, create_api
from duetime.config import Settings
from duetime.store import create_store
from duetime.tenancy.auth import issue_token

with warnings.catch_warnings():  # starlette deprecates its httpx-based client; it still works
    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from fastapi.testclient import TestClient

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
NS = "/v1/namespaces/shop"


@dataclass
class Api:
    client: TestClient
    clock: FrozenClock
    tokens: dict[str, str]

    def as_(self, who: str | None) -> dict[str, str]:
        return {} if who is None else {"Authorization": f"Bearer {self.tokens[who]}"}

    def post(self, path: str, body: Any, who: str | None = "rw") -> Any:
        return self.client.post(path, json=body, headers=self.as_(who))

    def patch(self, path: str, body: Any, who: str | None = "rw") -> Any:
        return self.client.patch(path, json=body, headers=self.as_(who))

    def get(self, path: str, who: str | None = "rw", **params: Any) -> Any:
        return self.client.get(path, params=params, headers=self.as_(who))

    def delete(self, path: str, who: str | None = "rw") -> Any:
        return self.client.delete(path, headers=self.as_(who))

    def names(self, **params: Any) -> list[str]:
        answer = self.get(f"{NS}/schedules", **params)
        assert answer.status_code == 200, answer.text
        return [item["name"] for item in answer.json()["items"]]


async def _issue_tokens(url: str) -> dict[str, str]:
    store = create_store(url)
    await store.open()
    try:
        for namespace in ("shop", "other"):
            await store.ensure_namespace(namespace, NOW)
        tokens = store.tokens
        scopes = {"rw": (["shop"], False), "ro": (["shop"], True), "other": (["other"], False)}
        issued = {}
        for who, (namespaces, read_only) in scopes.items():
            token = await issue_token(tokens, namespaces, read_only=read_only, name=who, now=NOW)
            issued[who] = token.secret
        return issued
    finally:
        await store.close()


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    url = f"sqlite:///{tmp_path / 'duetime.db'}"
    tokens = asyncio.run(_issue_tokens(url))
    clock = FrozenClock(NOW)
    app = create_api(ApiSettings(core=Settings(database_url=url)), clock=clock)
    with TestClient(app) as client:
        yield Api(client, clock, tokens)


def birthday(name: str = "birthday:user-42", **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": name,
        "type": "birthday.greeting",
        "cron": "0 9 15 3 *",
        "timezone": "America/New_York",
        "subject": "user-42",
        "payload": {"user": 42},
    }
    body.update(fields)
    return body


# -- define ----------------------------------------------------------------------------------
def test_create_then_same_again_is_kept_and_a_change_is_an_update(api: Api) -> None:
    created = api.post(f"{NS}/schedules", birthday())
    assert created.status_code == 201, created.text
    assert created.json()["action"] == "created"
    schedule = created.json()["schedule"]
    assert schedule["namespace"] == "shop"
    assert schedule["name"] == "birthday:user-42"
    assert (schedule["cron"], schedule["every"]) == ("0 9 15 3 *", None)
    assert schedule["timezone"] == "America/New_York"
    assert schedule["next_at"] == "2025-03-15T13:00:00Z"  # 09:00 EDT: DST began on 9 March
    assert schedule["active"] is True
    assert schedule["payload"] == {"user": 42}

    again = api.post(f"{NS}/schedules", birthday())
    assert again.status_code == 200
    assert again.json()["action"] == "kept"
    assert again.json()["schedule"]["version"] == schedule["version"]

    moved = api.post(f"{NS}/schedules", birthday(timezone="Asia/Tokyo"))
    assert moved.status_code == 200
    assert moved.json()["action"] == "updated"
    assert moved.json()["schedule"]["next_at"] == "2025-03-15T00:00:00Z"

    kept = api.post(f"{NS}/schedules", {**birthday(cron="0 10 * * *"), "on_conflict": "keep"})
    assert kept.status_code == 200
    assert kept.json()["action"] == "kept"
    assert kept.json()["schedule"]["cron"] == "0 9 15 3 *"


def test_a_duplicate_name_with_on_conflict_error_is_409(api: Api) -> None:
    assert api.post(f"{NS}/schedules", birthday()).status_code == 201
    clash = api.post(f"{NS}/schedules", {**birthday(cron="0 10 * * *"), "on_conflict": "error"})
    assert clash.status_code == 409, clash.text
    assert clash.json()["code"] == "already_exists"
    assert clash.json()["field"] == "name"
    shown = api.get(f"{NS}/schedules/birthday:user-42").json()["schedule"]
    assert shown["cron"] == "0 9 15 3 *"


def test_an_interval_schedule_and_creating_one_paused(api: Api) -> None:
    body = {"name": "poll", "type": "poll.feed", "every": "PT5M", "active": False}
    created = api.post(f"{NS}/schedules", body)
    assert created.status_code == 201, created.text
    schedule = created.json()["schedule"]
    assert (schedule["every"], schedule["cron"], schedule["active"]) == (300.0, None, False)
    # Without "active", defining it again leaves it paused.
    again = api.post(f"{NS}/schedules", {"name": "poll", "type": "poll.feed", "every": 300})
    assert again.json()["action"] == "kept"
    assert again.json()["schedule"]["active"] is False


# -- read ------------------------------------------------------------------------------------
def test_show_previews_the_next_occurrences_in_utc_and_local_time_across_dst(api: Api) -> None:
    api.clock.set(datetime(2025, 3, 7, 12, 0, tzinfo=UTC))
    body = {"name": "nightly", "type": "report", "cron": "30 2 * * *"}
    body["timezone"] = "America/New_York"
    assert api.post(f"{NS}/schedules", body).status_code == 201
    shown = api.get(f"{NS}/schedules/nightly", count=3)
    assert shown.status_code == 200, shown.text
    detail = shown.json()
    assert detail["schedule"]["name"] == "nightly"
    assert "America/New_York" in detail["description"]
    assert detail["next"] == [
        {"utc": "2025-03-08T07:30:00Z", "local": "2025-03-08T02:30:00-05:00"},
        # 02:30 does not exist on 9 March: cronie fires once at the end of the gap.
        {"utc": "2025-03-09T07:00:00Z", "local": "2025-03-09T03:00:00-04:00"},
        {"utc": "2025-03-10T06:30:00Z", "local": "2025-03-10T02:30:00-04:00"},
    ]
    assert len(api.get(f"{NS}/schedules/nightly").json()["next"]) == 5
    missing = api.get(f"{NS}/schedules/nope")
    assert missing.status_code == 404
    assert (missing.json()["code"], missing.json()["field"]) == ("not_found", "name")


def test_list_by_name_with_filters_and_a_cursor(api: Api) -> None:
    for user in range(5):
        body = birthday(f"birthday:user-{user}", subject=f"user-{user}")
        assert api.post(f"{NS}/schedules", body).status_code == 201
    poll = {"name": "poll", "type": "poll.feed", "every": 60, "active": False}
    assert api.post(f"{NS}/schedules", poll).status_code == 201
    first = api.get(f"{NS}/schedules", limit=4).json()
    assert [s["name"] for s in first["items"]] == [f"birthday:user-{n}" for n in range(4)]
    assert first["next_cursor"]
    rest = api.get(f"{NS}/schedules", limit=4, cursor=first["next_cursor"]).json()
    assert [s["name"] for s in rest["items"]] == ["birthday:user-4", "poll"]
    assert rest["next_cursor"] is None
    assert api.names(active="false") == ["poll"]
    assert api.names(type="poll.feed") == ["poll"]
    assert api.names(subject="user-3") == ["birthday:user-3"]
    bad = api.get(f"{NS}/schedules", cursor="not-a-cursor!")
    assert bad.status_code == 422
    assert bad.json()["field"] == "cursor"


# -- change ----------------------------------------------------------------------------------
def test_patch_changes_some_fields_and_recomputes_the_next_occurrence(api: Api) -> None:
    assert api.post(f"{NS}/schedules", birthday()).status_code == 201
    path = f"{NS}/schedules/birthday:user-42"
    changed = api.patch(path, {"cron": "0 8 15 3 *", "payload": {"user": 42, "v": 2}})
    assert changed.status_code == 200, changed.text
    assert changed.json()["action"] == "updated"
    schedule = changed.json()["schedule"]
    assert schedule["next_at"] == "2025-03-15T12:00:00Z"
    assert schedule["payload"] == {"user": 42, "v": 2}
    assert schedule["subject"] == "user-42"  # untouched

    same = api.patch(path, {"cron": "0 8 15 3 *"})
    assert same.json()["action"] == "kept"
    assert same.json()["schedule"]["version"] == schedule["version"]

    interval = api.patch(path, {"every": "PT1H", "subject": None})
    assert interval.status_code == 200, interval.text
    assert interval.json()["schedule"]["cron"] is None
    assert interval.json()["schedule"]["every"] == 3600.0
    assert interval.json()["schedule"]["subject"] is None


def test_overlap_and_catch_up_grace_are_defined_shown_and_changed(api: Api) -> None:
    made = api.post(f"{NS}/schedules", birthday())
    assert made.status_code == 201, made.text
    schedule = made.json()["schedule"]
    assert (schedule["overlap"], schedule["catch_up_grace"]) == ("allow", 60.0)
    path = f"{NS}/schedules/birthday:user-42"
    changed = api.patch(path, {"overlap": "buffer_one", "catch_up_grace": "PT10M"})
    assert changed.status_code == 200, changed.text
    assert changed.json()["action"] == "updated"
    schedule = changed.json()["schedule"]
    assert (schedule["overlap"], schedule["catch_up_grace"]) == ("buffer_one", 600.0)
    assert schedule["next_at"] == "2025-03-15T13:00:00Z"  # the sequence goes on
    again = api.post(f"{NS}/schedules", birthday(overlap="skip", catch_up_grace=0))
    assert again.json()["action"] == "updated"
    assert (again.json()["schedule"]["overlap"], again.json()["schedule"]["catch_up_grace"]) == (
        "skip",
        0.0,
    )
    assert api.get(path).json()["schedule"]["overlap"] == "skip"


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"cron": "61 * * * *"}, "invalid_cron", "cron"),
        ({"timezone": "Mars/Olympus"}, "unknown_timezone", "timezone"),
        ({"colour": "red"}, "invalid_input", "colour"),
        ({}, "invalid_input", "body"),
        ({"type": None}, "invalid_input", "type"),
        ({"active": "yes"}, "invalid_input", "active"),
        ({"catch_up": "some"}, "invalid_input", "catch_up"),
        ({"cron": None}, "invalid_input", "cron"),
        ({"start_at": "2025-04-01T00:00:00"}, "invalid_input", "start_at"),
        (["cron"], "invalid_input", "body"),
        ({"overlap": "queue"}, "invalid_input", "overlap"),
        ({"overlap": None}, "invalid_input", "overlap"),
        ({"catch_up_grace": -1}, "invalid_input", "catch_up_grace"),
        ({"catch_up_grace": None}, "invalid_input", "catch_up_grace"),
    ],
    ids=[
        "invalid-cron", "unknown-timezone", "unknown-field", "empty", "null-type", "bad-active",
        "bad-catch-up", "no-rule-left", "naive-start", "not-an-object", "bad-overlap",
        "null-overlap", "negative-grace", "null-grace",
    ],
)  # fmt: skip
def test_a_bad_patch_is_422_and_changes_nothing(api: Api, body: Any, code: str, field: str) -> None:
    stored = api.post(f"{NS}/schedules", birthday()).json()["schedule"]
    answer = api.patch(f"{NS}/schedules/birthday:user-42", body)
    assert answer.status_code == 422, answer.text
    assert (answer.json()["code"], answer.json()["field"]) == (code, field)
    assert api.get(f"{NS}/schedules/birthday:user-42").json()["schedule"] == stored


def test_patch_pause_resume_and_delete_an_unknown_schedule_are_404(api: Api) -> None:
    for answer in (
        api.patch(f"{NS}/schedules/nope", {"cron": "0 * * * *"}),
        api.post(f"{NS}/schedules/nope/pause", None),
        api.post(f"{NS}/schedules/nope/resume", None),
        api.delete(f"{NS}/schedules/nope"),
    ):
        assert answer.status_code == 404, answer.text
        assert answer.json()["field"] == "name"


def test_pause_and_resume(api: Api) -> None:
    assert api.post(f"{NS}/schedules", birthday()).status_code == 201
    path = f"{NS}/schedules/birthday:user-42"
    paused = api.post(f"{path}/pause", None)
    assert paused.status_code == 200, paused.text
    assert paused.json()["action"] == "paused"
    assert paused.json()["schedule"]["active"] is False
    assert api.get(path).json()["next"] == []
    assert api.names(active="true") == []
    resumed = api.post(f"{path}/resume", None)
    assert resumed.json()["action"] == "resumed"
    assert resumed.json()["schedule"]["active"] is True
    assert api.get(path).json()["next"][0]["utc"] == "2025-03-15T13:00:00Z"


def test_delete(api: Api) -> None:
    assert api.post(f"{NS}/schedules", birthday()).status_code == 201
    deleted = api.delete(f"{NS}/schedules/birthday:user-42")
    assert deleted.status_code == 200, deleted.text
    assert deleted.json()["action"] == "deleted"
    assert deleted.json()["schedule"]["name"] == "birthday:user-42"
    assert deleted.json()["cancelled"] == 0
    assert api.get(f"{NS}/schedules/birthday:user-42").status_code == 404
    assert api.delete(f"{NS}/schedules/birthday:user-42").status_code == 404
    assert api.names() == []


# -- bad input -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        (birthday(cron="0 9 * *"), "invalid_cron", "cron"),
        (birthday(cron="0 0 30 2 *"), "invalid_cron", "cron"),
        (birthday(cron="@sometimes"), "invalid_cron", "cron"),
        (birthday(timezone="Mars/Olympus"), "unknown_timezone", "timezone"),
        (birthday(timezone=5), "invalid_input", "timezone"),
        (birthday(every="PT5M"), "invalid_input", "every"),
        (birthday(cron=None), "invalid_input", "cron"),
        (birthday(every=None, cron=None), "invalid_input", "cron"),
        ({"name": "x", "type": "t", "every": "P1M"}, "invalid_input", "every"),
        ({"name": "x", "type": "t", "every": 0}, "invalid_input", "every"),
        ({"type": "t", "every": 60}, "invalid_input", "name"),
        ({"name": "x", "every": 60}, "invalid_input", "type"),
        (birthday(name="has space"), "invalid_input", "name"),
        (birthday(name="n" * 201), "invalid_input", "name"),
        (birthday(start_at="2025-04-01T00:00:00"), "invalid_input", "start_at"),
        (birthday(end_at="2020-01-01T00:00:00Z"), "invalid_input", "end_at"),
        (birthday(start_at="9999-12-31T23:59:59Z"), "invalid_input", "start_at"),
        (birthday(end_at="0001-01-01T00:00:00+01:00"), "invalid_input", "end_at"),
        (birthday(catch_up="some"), "invalid_input", "catch_up"),
        (birthday(on_gap="never"), "invalid_input", "on_gap"),
        (birthday(max_attempts=0), "invalid_input", "max_attempts"),
        (birthday(active="yes"), "invalid_input", "active"),
        (birthday(on_conflict="merge"), "invalid_input", "on_conflict"),
        (birthday(colour="red"), "invalid_input", "colour"),
        (birthday(subject=""), "invalid_input", "subject"),
        (["not", "an", "object"], "invalid_input", "body"),
        (birthday(overlap="queue"), "invalid_input", "overlap"),
        (birthday(overlap=True), "invalid_input", "overlap"),
        (birthday(catch_up_grace=-5), "invalid_input", "catch_up_grace"),
        (birthday(catch_up_grace="P32D"), "invalid_input", "catch_up_grace"),
        (birthday(catch_up_grace="soon"), "invalid_input", "catch_up_grace"),
        (birthday(catch_up_grace=[60]), "invalid_input", "catch_up_grace"),
    ],
    ids=[
        "four-fields", "never-fires", "unknown-alias", "unknown-timezone", "timezone-not-text",
        "cron-and-every", "no-rule", "null-rules", "every-months", "every-zero", "no-name",
        "no-type", "bad-name", "long-name", "naive-start", "ended", "start-out-of-range",
        "end-out-of-range", "bad-catch-up", "bad-on-gap",
        "zero-attempts", "bad-active", "bad-on-conflict", "unknown-field", "empty-subject",
        "not-an-object", "bad-overlap", "overlap-not-text", "negative-grace", "grace-too-long",
        "grace-not-a-duration", "grace-not-a-scalar",
    ],
)  # fmt: skip
def test_bad_schedules_are_422_naming_the_field_and_store_nothing(
    api: Api, body: Any, code: str, field: str
) -> None:
    answer = api.post(f"{NS}/schedules", body)
    assert answer.status_code == 422, answer.text
    error = answer.json()
    assert (error["code"], error["field"]) == (code, field)
    assert set(error) == {"code", "message", "field"}
    assert api.names() == []


def test_malformed_json_is_400(api: Api) -> None:
    answer = api.client.post(
        f"{NS}/schedules",
        content=b"{nope",
        headers={**api.as_("rw"), "content-type": "application/json"},
    )
    assert answer.status_code == 400
    assert answer.json()["code"] == "invalid_json"


# -- auth ------------------------------------------------------------------------------------
def test_a_read_only_token_reads_schedules_but_cannot_change_them(api: Api) -> None:
    assert api.post(f"{NS}/schedules", birthday()).status_code == 201
    path = f"{NS}/schedules/birthday:user-42"
    assert api.get(path, who="ro").status_code == 200
    assert api.get(f"{NS}/schedules", who="ro").status_code == 200
    for answer in (
        api.post(f"{NS}/schedules", birthday("other"), who="ro"),
        api.patch(path, {"cron": "0 * * * *"}, who="ro"),
        api.post(f"{path}/pause", None, who="ro"),
        api.post(f"{path}/resume", None, who="ro"),
        api.delete(path, who="ro"),
    ):
        assert answer.status_code == 403, answer.text
        assert answer.json()["code"] == "forbidden"
    assert api.names() == ["birthday:user-42"]
    assert api.get(path).json()["schedule"]["version"] == 1


def test_other_tenants_and_anonymous_callers_see_nothing(api: Api) -> None:
    assert api.post(f"{NS}/schedules", birthday()).status_code == 201
    path = f"{NS}/schedules/birthday:user-42"
    for answer in (
        api.get(path, who="other"),
        api.get(f"{NS}/schedules", who="other"),
        api.post(f"{NS}/schedules", birthday("x"), who="other"),
        api.delete(path, who="other"),
    ):
        assert answer.status_code == 404, answer.text
        assert answer.json()["field"] == "namespace"
    for answer in (api.get(path, who=None), api.get("/v1/preview", who=None, cron="@daily")):
        assert answer.status_code == 401
    assert api.get("/v1/namespaces/other/schedules", who="other").json()["items"] == []


# -- preview ---------------------------------------------------------------------------------
def test_preview_a_cron_across_the_dst_gap_and_an_interval(api: Api) -> None:
    answer = api.get(
        "/v1/preview",
        cron="30 2 * * *",
        timezone="America/New_York",
        after="2025-03-07T12:00:00Z",
        count=3,
    )
    assert answer.status_code == 200, answer.text
    preview = answer.json()
    assert preview["timezone"] == "America/New_York"
    assert [o["utc"] for o in preview["occurrences"]] == [
        "2025-03-08T07:30:00Z",
        "2025-03-09T07:00:00Z",
        "2025-03-10T06:30:00Z",
    ]
    assert preview["occurrences"][1]["local"] == "2025-03-09T03:00:00-04:00"
    skipped = api.get(
        "/v1/preview",
        cron="30 2 * * *",
        timezone="America/New_York",
        after="2025-03-07T12:00:00Z",
        on_gap="skip",
        count=2,
    ).json()
    assert [o["utc"] for o in skipped["occurrences"]] == [
        "2025-03-08T07:30:00Z",
        "2025-03-10T06:30:00Z",
    ]
    every = api.get("/v1/preview", every="PT90M", count=2).json()
    assert len(every["occurrences"]) == 2
    assert every["description"].startswith("Every")
    assert len(api.get("/v1/preview", cron="@hourly").json()["occurrences"]) == 5


@pytest.mark.parametrize(
    ("params", "code", "field"),
    [
        ({}, "invalid_input", "cron"),
        ({"cron": "* * *"}, "invalid_cron", "cron"),
        ({"cron": "@daily", "timezone": "Mars/Olympus"}, "unknown_timezone", "timezone"),
        ({"cron": "@daily", "count": 0}, "invalid_input", "count"),
        ({"cron": "@daily", "count": 1001}, "invalid_input", "count"),
        ({"cron": "@daily", "after": "2025-03-07T12:00"}, "invalid_input", "after"),
        ({"every": "PT1S", "after": "9999-12-31T23:59:59Z"}, "invalid_input", "after"),
        ({"cron": "@daily", "every": "PT5M"}, "invalid_input", "every"),
        ({"cron": "@daily", "on_gap": "maybe"}, "invalid_input", "on_gap"),
    ],
    ids=[
        "no-rule", "bad-cron", "unknown-zone", "zero", "too-many", "naive-after", "late-after",
        "both",
        "bad-on-gap",
    ],
)  # fmt: skip
def test_preview_refuses_bad_rules_naming_the_field(
    api: Api, params: dict[str, Any], code: str, field: str
) -> None:
    answer = api.get("/v1/preview", **params)
    assert answer.status_code == 422, answer.text
    assert (answer.json()["code"], answer.json()["field"]) == (code, field)


def test_the_schema_documents_the_schedule_operations(api: Api) -> None:
    paths = api.client.get("/openapi.json").json()["paths"]
    assert set(paths["/v1/namespaces/{namespace}/schedules"]) == {"get", "post"}
    assert set(paths["/v1/namespaces/{namespace}/schedules/{name}"]) == {"get", "patch", "delete"}
    assert "post" in paths["/v1/namespaces/{namespace}/schedules/{name}/pause"]
    assert "post" in paths["/v1/namespaces/{namespace}/schedules/{name}/resume"]
    assert "get" in paths["/v1/preview"]


# -- without auth ----------------------------------------------------------------------------
def test_a_schedule_needs_its_namespace_created_first(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'open.db'}"
    app = create_api(ApiSettings(core=Settings(database_url=url)), clock=FrozenClock(NOW))
    with TestClient(app) as client:
        typo = client.post("/v1/namespaces/fresh/schedules", json=birthday())
        assert (typo.status_code, typo.json()["code"]) == (404, "unknown_namespace")
        assert client.get("/v1/namespaces").json()["items"] == []  # the typo left nothing
        assert client.post("/v1/namespaces", json={"name": "fresh"}).status_code == 201
        bad = client.post("/v1/namespaces/fresh/schedules", json=birthday(cron="nope"))
        assert bad.status_code == 422
        answer = client.post("/v1/namespaces/fresh/schedules", json=birthday())
        assert answer.status_code == 201, answer.text
        assert client.get("/v1/namespaces").json()["items"] == ["fresh"]
        assert client.get("/v1/preview", params={"cron": "@daily"}).status_code == 200


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("rrule", "dtstart", "part"),
    [
        ("FREQ=SECONDLY;COUNT=999999999", "2025-01-01T00:00", "COUNT"),
        ("FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=29;BYHOUR=23", "2096-03-01T00:00", "BYMONTHDAY"),
    ],
    ids=["count", "feb29"],
)
def test_a_rule_too_costly_to_expand_is_refused_naming_its_part(
    api: Api, rrule: str, dtstart: str, part: str
) -> None:
    """Any token, a read-only one too, may preview: a rule dateutil would walk second by
    second for minutes is refused at once instead of holding the server."""
    answer = api.get("/v1/preview", who="ro", rrule=rrule, dtstart=dtstart, timezone="UTC")
    assert answer.status_code == 422, answer.text
    error = answer.json()
    assert (error["code"], error["field"]) == ("rule_too_costly", "rrule")
    assert f"rrule: {part}: " in error["message"]
    refused = api.post(
        f"{NS}/schedules", birthday(cron=None, rrule=rrule, dtstart=dtstart, timezone="UTC")
    )
    assert refused.status_code == 422, refused.text
    assert refused.json()["code"] == "rule_too_costly"
    assert api.names() == []
