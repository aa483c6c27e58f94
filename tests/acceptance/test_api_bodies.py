"""A request body is described once: the table that reads it is the table the API documents."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from duetime import TimerRequest
from duetime.api import ApiSettings, create_api
from duetime.bodies import Body, BodyField
from duetime.config import Settings
from duetime.errors import InvalidInput
from duetime.requests import TIMER_BODY

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
