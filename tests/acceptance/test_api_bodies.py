"""A request body is described once: the table that reads it is the table the API documents."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from duetime import ScheduleRequest, TimerRequest
from duetime.api import ApiSettings, create_api
from duetime.api.limits import LIMIT_BODY, PATTERN_BODY
from duetime.api.operations import BULK_BODY, FILTER_BODY
from duetime.api.system import NAMESPACE_BODY
from duetime.bodies import Body, BodyField
from duetime.config import Settings
from duetime.errors import InvalidInput
from duetime.requests import EDIT_BODY, TIMER_BODY
from duetime.schedule_bodies import (
    NOT_CLEARABLE,
    SCHEDULE_PATCH_BODY,
    SCHEDULE_PUT_BODY,
    SCHEDULE_REQUEST_BODY,
)

PET = Body(
    "PetBody",
    "A pet.",
    (
        BodyField("name", {"type": "string"}, "Its name", ("Rex",), required=True),
        BodyField("legs", {"type": "integer", "minimum": 0}, whole=True),
        BodyField("kind", {"type": "string", "enum": ["cat", "dog"]}, default="cat"),
        BodyField("zone", lambda: {"type": "string", "enum": ["UTC"]}),
        BodyField("toy"),
    ),
)


def _refused(body: Body, data: object, prefix: str = "") -> tuple[str, str]:
    with pytest.raises(InvalidInput) as raised:
        body.read(data, prefix)
    return raised.value.field, raised.value.message.removeprefix(f"{raised.value.field}: ")


def test_a_body_reads_known_fields_and_counts_as_whole_numbers() -> None:
    assert PET.read({"name": "Rex", "legs": 4.0}) == {"name": "Rex", "legs": 4}
    assert type(PET.read({"name": "Rex", "legs": 4.0})["legs"]) is int
    assert PET.read({"name": "Rex", "legs": 4.5})["legs"] == 4.5  # left to the field's check
    assert _refused(PET, {"name": "Rex", "tail": 1}) == ("tail", "is not a known field")
    assert _refused(PET, {"legs": 4}) == ("name", "is required")
    assert _refused(PET, [1]) == ("body", "must be a JSON object")
    assert _refused(PET, [1], "pets[3].") == ("pets[3]", "must be a JSON object")
    assert _refused(PET, {"nam": "Rex"}, "pets[3].") == ("pets[3].nam", "is not a known field")


def test_a_body_documents_the_fields_it_reads() -> None:
    schema = PET.json_schema()
    assert set(schema["properties"]) == PET.names
    assert schema["required"] == ["name"]
    assert schema["additionalProperties"] is False
    properties = schema["properties"]
    assert properties["name"] == {
        "type": "string",
        "description": "Its name",
        "examples": ["Rex"],
        "title": "Name",
    }
    assert properties["legs"]["anyOf"] == [{"type": "integer", "minimum": 0}, {"type": "null"}]
    assert properties["kind"] == {
        "type": "string",
        "enum": ["cat", "dog"],
        "default": "cat",
        "title": "Kind",
    }
    assert properties["zone"]["anyOf"] == [{"type": "string", "enum": ["UTC"]}, {"type": "null"}]
    assert properties["toy"] == {"title": "Toy"}  # any JSON, null too


def test_a_timer_request_is_read_by_its_table(tmp_path: Path) -> None:
    """The Python request, the REST API's reader and /openapi.json come from one table: a
    count sent as 3.0 is read as 3 everywhere, and the document lists exactly the fields."""
    request = TimerRequest.from_dict({"type": "a", "delay": 5, "max_attempts": 3.0})
    assert type(request.max_attempts) is int
    with pytest.raises(InvalidInput) as raised:
        TimerRequest.from_dict({"delay": 5})
    assert raised.value.field == "type"
    assert raised.value.message == "type: an event type is required"
    api = create_api(ApiSettings(core=Settings(database_url=f"sqlite:///{tmp_path / 'd.db'}")))
    with TestClient(api) as client:
        document = client.get("/openapi.json").json()
    bodies = {
        path.rsplit("/", 1)[1]: operation["post"]["requestBody"]["content"]["application/json"]
        for path, operation in document["paths"].items()
        if path in ("/v1/namespaces/{namespace}/timers", "/v1/namespaces/{namespace}/events")
    }
    timer, event = bodies["timers"]["schema"], bodies["events"]["schema"]
    assert set(timer["properties"]) == TIMER_BODY.names | {"on_conflict"}
    assert timer["oneOf"] == TIMER_BODY.json_schema()["oneOf"]
    assert set(event["properties"]) < TIMER_BODY.names
    for name, shown in event["properties"].items():
        assert shown == timer["properties"][name], name


def test_a_limit_and_a_pause_are_read_by_the_tables_they_are_documented_by(
    tmp_path: Path,
) -> None:
    api = create_api(ApiSettings(core=Settings(database_url=f"sqlite:///{tmp_path / 'd.db'}")))
    base = "/v1/namespaces/shop"
    with TestClient(api) as client:
        assert client.post("/v1/namespaces", json={"name": "shop"}).status_code == 201
        document = client.get("/openapi.json").json()["paths"]
        refused = [
            ("put", f"{base}/limits/a.*", {"rate": "5/s", "colour": 1}, "colour"),
            ("post", f"{base}/pause", {}, "pattern"),
            ("post", f"{base}/resume", {"pattern": "a.*", "why": "x"}, "why"),
            ("put", f"{base}/limits/a.*", [1], "body"),
        ]
        for method, url, body, field in refused:
            answer = client.request(method.upper(), url, json=body)
            assert answer.status_code == 422, answer.text
            assert answer.json()["field"] == field, answer.text
        answer = client.put(f"{base}/limits/a.*", json={"concurrency": 2.0, "burst": None})
        assert answer.json()["limit"]["concurrency"] == 2
        assert client.post(f"{base}/pause", json={"pattern": "a.*"}).status_code == 200
    shown = {
        body.title: document[path][method]["requestBody"]["content"]["application/json"]
        for body, path, method in (
            (LIMIT_BODY, "/v1/namespaces/{namespace}/limits/{pattern}", "put"),
            (PATTERN_BODY, "/v1/namespaces/{namespace}/pause", "post"),
        )
    }
    assert shown == {
        LIMIT_BODY.title: {"schema": LIMIT_BODY.json_schema()},
        PATTERN_BODY.title: {"schema": PATTERN_BODY.json_schema()},
    }


def test_an_edit_is_read_and_documented_by_one_table(tmp_path: Path) -> None:
    """An edit names only a due time and a payload, each with a value: what ``AsyncApp.edit``
    reads is what /openapi.json shows (no null, no default)."""
    api = create_api(ApiSettings(core=Settings(database_url=f"sqlite:///{tmp_path / 'd.db'}")))
    url = "/v1/namespaces/shop/timers/k"
    with TestClient(api) as client:
        assert client.post("/v1/namespaces", json={"name": "shop"}).status_code == 201
        made = client.post(
            "/v1/namespaces/shop/timers", json={"type": "a", "key": "k", "delay": 60}
        )
        assert made.status_code == 201, made.text
        refused = client.patch(url, json={"delay": 90, "subject": "u"})
        assert refused.status_code == 422
        assert refused.json()["field"] == "subject"
        assert "is not a field one can edit (at, delay, local" in refused.json()["message"]
        assert client.patch(url, json={"delay": 90}).status_code == 200
        paths = client.get("/openapi.json").json()["paths"]
    body = paths["/v1/namespaces/{namespace}/timers/{key}"]["patch"]["requestBody"]
    schema = body["content"]["application/json"]["schema"]
    assert schema == EDIT_BODY.json_schema()
    assert set(schema["properties"]) == EDIT_BODY.names
    for shown in schema["properties"].values():
        assert "default" not in shown
        assert {"type": "null"} not in shown.get("anyOf", [])


def test_a_bulk_action_and_its_filter_are_read_by_their_documented_tables(
    tmp_path: Path,
) -> None:
    api = create_api(ApiSettings(core=Settings(database_url=f"sqlite:///{tmp_path / 'd.db'}")))
    url = "/v1/namespaces/shop/timers/bulk"
    with TestClient(api) as client:
        assert client.post("/v1/namespaces", json={"name": "shop"}).status_code == 201
        for body, field in (
            ({"action": "cancel", "filter": {"colour": "red"}}, "filter.colour"),
            ({"action": "cancel", "filter": []}, "filter"),
            ({"filter": {}}, "action"),
            ({"action": "cancel", "why": 1}, "why"),
        ):
            answer = client.post(url, json=body)
            assert answer.status_code == 422, answer.text
            assert answer.json()["field"] == field, answer.text
        taken = client.post(url, json={"action": "cancel", "filter": {"type": "a.*"}})
        assert taken.json() == {"action": "cancel", "dry_run": False, "count": 0}
        paths = client.get("/openapi.json").json()["paths"]
    body = paths["/v1/namespaces/{namespace}/timers/bulk"]["post"]["requestBody"]
    schema = body["content"]["application/json"]["schema"]
    assert schema == BULK_BODY.json_schema()
    assert set(schema["properties"]["filter"]["properties"]) == FILTER_BODY.names


def test_a_schedule_and_its_change_are_read_by_their_documented_tables(tmp_path: Path) -> None:
    """A definition and a patch are read by the tables /openapi.json shows: an unknown name,
    a missing one and a count given as 3.0 are answered the same way everywhere; a patch's
    fields have no default and only the clearable ones take null."""
    api = create_api(ApiSettings(core=Settings(database_url=f"sqlite:///{tmp_path / 'd.db'}")))
    url = "/v1/namespaces/shop/schedules"
    with TestClient(api) as client:
        assert client.post("/v1/namespaces", json={"name": "shop"}).status_code == 201
        for body, field in (
            ({"name": "s", "type": "a", "every": 60, "colour": "red"}, "colour"),
            ({"type": "a", "every": 60}, "name"),
            ({"name": "s", "every": 60}, "type"),
            ({"name": "s", "type": "a", "every": 60, "max_attempts": 2.5}, "max_attempts"),
            ([], "body"),
        ):
            answer = client.post(url, json=body)
            assert answer.status_code == 422, answer.text
            assert answer.json()["field"] == field, answer.text
        made = client.post(url, json={"name": "s", "type": "a", "every": 60, "max_attempts": 3.0})
        assert made.status_code == 201, made.text
        assert made.json()["schedule"]["max_attempts"] == 3
        refused = client.patch(f"{url}/s", json={"colour": "red"})
        assert (refused.status_code, refused.json()["field"]) == (422, "colour")
        changed = client.patch(f"{url}/s", json={"max_attempts": 4.0})
        assert changed.status_code == 200, changed.text
        assert changed.json()["schedule"]["max_attempts"] == 4
        paths = client.get("/openapi.json").json()["paths"]
    put = paths["/v1/namespaces/{namespace}/schedules"]["post"]["requestBody"]
    assert put["content"]["application/json"]["schema"] == SCHEDULE_PUT_BODY.json_schema()
    patch = paths["/v1/namespaces/{namespace}/schedules/{name}"]["patch"]["requestBody"]
    schema = patch["content"]["application/json"]["schema"]
    assert schema == SCHEDULE_PATCH_BODY.json_schema()
    assert SCHEDULE_PATCH_BODY.names == SCHEDULE_REQUEST_BODY.names - {"name"}
    assert SCHEDULE_PUT_BODY.names == SCHEDULE_REQUEST_BODY.names | {"on_conflict"}
    for name, shown in schema["properties"].items():
        assert "default" not in shown
        clearable = {"type": "null"} in shown.get("anyOf", []) or name == "payload"
        assert clearable == (name not in NOT_CLEARABLE), name


def test_a_schedule_request_is_read_by_its_table() -> None:
    assert ScheduleRequest.from_dict({"name": "s", "type": "a", "every": 60}).active is True
    with pytest.raises(InvalidInput) as raised:
        ScheduleRequest.from_dict({"name": "s", "type": "a", "on_conflict": "keep"}, "lines.")
    assert raised.value.field == "lines.on_conflict"


def test_a_namespace_is_read_by_its_documented_table(tmp_path: Path) -> None:
    api = create_api(ApiSettings(core=Settings(database_url=f"sqlite:///{tmp_path / 'd.db'}")))
    with TestClient(api) as client:
        for body, field in (
            ({"name": "shop", "colour": "red"}, "colour"),
            ({"nom": "shop"}, "name"),
            (["shop"], "body"),
            ({"name": "Not A Name"}, "name"),
        ):
            answer = client.post("/v1/namespaces", json=body)
            assert answer.status_code == 422, answer.text
            assert answer.json()["field"] == field, answer.text
        missing = client.post("/v1/namespaces", json={}).json()
        assert missing["message"] == 'name: is required: send {"name": "<namespace>"}'
        assert client.post("/v1/namespaces", json={"name": "shop"}).status_code == 201
        paths = client.get("/openapi.json").json()["paths"]
    body = paths["/v1/namespaces"]["post"]["requestBody"]
    assert body["content"]["application/json"]["schema"] == NAMESPACE_BODY.json_schema()
