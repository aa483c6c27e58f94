"""Bad input over HTTP: a clear 4xx naming the field, and nothing stored — never a 5xx.

Runs against a server with auth on, as a deployment would; one request per case.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from .test_api_serve import Server, Tokens, secured_server


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Tokens]]:
    yield from secured_server(tmp_path_factory)


LIMIT = 256 * 1024
DEEP = json.loads("[" * 65 + "1" + "]" * 65)


@pytest.mark.parametrize(
    ("body", "status", "code", "field"),
    [
        ({"type": "x", "at": "2031-03-15T09:00:00"}, 422, "invalid_input", "at"),
        ({"type": "x", "local": "2031-03-15T09:00", "timezone": "Mars/Olympus"}, 422,
         "unknown_timezone", "timezone"),
        ({"type": "x", "date": "2025-02-29"}, 422, "invalid_input", "date"),
        ({"type": "x", "at": "1900-01-01T00:00:00Z"}, 422, "invalid_input", "at"),
        ({"type": "x", "delay": 1, "payload": "p" * (LIMIT + 100)}, 422, "invalid_input",
         "payload"),
        ({"type": "x", "delay": 1, "payload": "p" * (LIMIT + 20_000)}, 413, "payload_too_large",
         "payload"),
        ({"type": "x", "delay": 1, "key": ""}, 422, "invalid_input", "key"),
        ({"type": "x", "delay": 1, "key": "k" * 300}, 422, "invalid_input", "key"),
        ({"type": "", "delay": 1}, 422, "invalid_input", "type"),
        ({"delay": 1}, 422, "invalid_input", "type"),
        ({"type": "x", "delay": 1, "colour": "red"}, 422, "invalid_input", "colour"),
        ({"type": "x", "delay": 1, "on_conflict": "merge"}, 422, "invalid_input", "on_conflict"),
        ({"type": "x", "delay": 1, "max_attempts": 0}, 422, "invalid_input", "max_attempts"),
        ({"type": "x", "local": "2031-03-09T02:30", "timezone": "America/New_York",
          "disambiguation": "reject"}, 422, "nonexistent_local_time", "local"),
        ({"type": "x", "delay": 1, "at": "2031-03-15T09:00:00Z"}, 422, "invalid_input", None),
        (["not", "an", "object"], 422, "invalid_input", "body"),
        ({"type": "x", "delay": 0, "expires_after": 1e12}, 422, "invalid_input", "expires_after"),
        ({"type": "x", "delay": 0, "expires_after": 8.6e13}, 422, "invalid_input",
         "expires_after"),
        ({"type": "x", "delay": 0, "expires_after": "P200Y"}, 422, "invalid_input",
         "expires_after"),
        ({"type": "x", "delay": 1e300}, 422, "invalid_input", "delay"),
        ({"type": "x", "at": "9500-01-01T00:00:00Z"}, 422, "invalid_input", "at"),
        ({"type": "x", "at": "2025-02-29T09:00:00Z"}, 422, "invalid_input", "at"),
        ({"type": "x", "delay": 1, "subject": "ada\nforged"}, 422, "invalid_input", "subject"),
        ({"type": "x", "delay": 1, "key": "k\x1b[2J"}, 422, "invalid_input", "key"),
        ({"type": "x", "delay": 1, "payload": DEEP}, 422, "invalid_input", "payload"),
        ({"type": "x", "delay": 1, "priority": -1}, 422, "invalid_input", "priority"),
        ({"type": "x", "delay": 1, "priority": 10}, 422, "invalid_input", "priority"),
        ({"type": "x", "delay": 1, "priority": "high"}, 422, "invalid_input", "priority"),
    ],
    ids=[
        "naive-at", "unknown-timezone", "invalid-date", "date-out-of-range", "payload-over-limit",
        "body-over-limit", "empty-key", "300-char-key", "empty-type", "missing-type",
        "unknown-field", "bad-on-conflict", "zero-attempts", "reject-in-gap", "two-whens",
        "not-an-object", "expires-after-1e12", "expires-after-8.6e13", "expires-after-200y",
        "delay-1e300", "at-past-9000", "at-nonexistent-day", "control-in-subject",
        "control-in-key", "payload-65-levels", "priority-minus-1", "priority-10",
        "priority-high",
    ],
)  # fmt: skip
def test_bad_timer_bodies_are_refused_and_store_nothing(
    secured: tuple[Server, Tokens],
    body: Any,
    status: int,
    code: str,
    field: str | None,
) -> None:
    server, tokens = secured
    with server.client(tokens.alpha) as client:
        before = client.get("/v1/namespaces/alpha/timers", params={"limit": 1000}).json()
        answer = client.post("/v1/namespaces/alpha/timers", json=body)
        assert answer.status_code == status, answer.text[:500]
        error = answer.json()
        assert error["code"] == code
        if field is not None:
            assert error["field"] == field
        assert error["message"]
        after = client.get("/v1/namespaces/alpha/timers", params={"limit": 1000}).json()
        assert after == before


@pytest.mark.parametrize(
    ("content", "headers"),
    [
        (b"{not json", {"Content-Type": "application/json"}),
        (b"", {"Content-Type": "application/json"}),
        (b'{"type": "x", "delay": NaN}', {"Content-Type": "application/json"}),
        (b"\xff\xfe\x00", {"Content-Type": "application/json"}),
        (b"[" * 100_000, {"Content-Type": "application/json"}),
    ],
    ids=["broken", "empty", "nan", "binary", "deep"],
)
def test_a_body_that_is_not_json_is_a_400_naming_the_body(
    secured: tuple[Server, Tokens], content: bytes, headers: dict[str, str]
) -> None:
    server, tokens = secured
    with server.client(tokens.alpha) as client:
        before = client.get("/v1/namespaces/alpha/timers", params={"limit": 1000}).json()
        answer = client.post("/v1/namespaces/alpha/timers", content=content, headers=headers)
        assert answer.status_code == 400, answer.text
        assert answer.json()["code"] == "invalid_json"
        assert answer.json()["field"] == "body"
        assert client.get("/v1/namespaces/alpha/timers", params={"limit": 1000}).json() == before


def test_unknown_namespace_and_bad_token_over_http(secured: tuple[Server, Tokens]) -> None:
    server, tokens = secured
    body = {"type": "x", "delay": 1}
    with server.client(tokens.admin) as admin:
        unknown = admin.post("/v1/namespaces/nowhere/timers", json=body)
        assert unknown.status_code == 404
        assert unknown.json()["field"] == "namespace"
        assert admin.get("/v1/namespaces/nowhere/timers").status_code == 404
        malformed = admin.get("/v1/namespaces/Not%20A%20Name/timers")
        assert malformed.status_code == 422
        assert malformed.json()["field"] == "namespace"
    with server.client("dt_" + "A" * 43) as stranger:
        refused = stranger.post("/v1/namespaces/alpha/timers", json=body)
        assert refused.status_code == 401
        assert refused.json()["field"] == "authorization"


def test_creating_a_timer_answers_alike_on_the_fast_route_and_the_documented_one(
    secured: tuple[Server, Tokens],
) -> None:
    """POST …/timers is served outside FastAPI's dependency solving (duetime.api.plain_routes) for a
    valid namespace name; a malformed one falls through to the documented route's 422."""
    server, tokens = secured
    body = {"type": "x", "delay": 1}
    with server.client(tokens.admin) as admin:
        malformed = admin.post("/v1/namespaces/Not%20A%20Name/timers", json=body)
        assert malformed.status_code == 422
        assert malformed.json()["field"] == "namespace"
        long = admin.post(f"/v1/namespaces/{'a' * 64}/timers", json=body)
        assert long.status_code == 422
        assert long.json()["field"] == "namespace"
        made = admin.post("/v1/namespaces/alpha/timers", json={**body, "key": "fast-1"})
        assert made.status_code == 201
        assert made.json()["timer"]["key"] == "fast-1"
        bad = admin.post("/v1/namespaces/alpha/timers", json={"type": "x", "delay": "soon"})
        assert bad.status_code == 422
        assert bad.json()["field"] == "delay"
        assert "x-content-type-options" in {k.lower() for k in made.headers}
    with server.client() as anonymous:
        refused = anonymous.post("/v1/namespaces/alpha/timers", json=body)
        assert refused.status_code == 401
        assert refused.json()["field"] == "authorization"


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 5000}, "limit"),
        ({"limit": "many"}, "limit"),
        ({"status": "asleep"}, "status"),
        ({"cursor": "!!nope!!"}, "cursor"),
        ({"type": "bad type!"}, "type"),
    ],
)
def test_bad_list_parameters_are_422_naming_them(
    secured: tuple[Server, Tokens], params: dict[str, Any], field: str
) -> None:
    server, tokens = secured
    with server.client(tokens.alpha) as client:
        answer = client.get("/v1/namespaces/alpha/timers", params=params)
        assert answer.status_code == 422, answer.text
        assert answer.json()["code"] == "invalid_input"
        assert answer.json()["field"] == field


def test_unknown_routes_and_methods_answer_in_the_same_shape(
    secured: tuple[Server, Tokens],
) -> None:
    server, tokens = secured
    with server.client(tokens.alpha) as client:
        missing = client.get("/v1/nothing-here")
        assert missing.status_code == 404
        assert missing.json()["code"] == "not_found"
        wrong = client.put("/v1/namespaces/alpha/timers")
        assert wrong.status_code == 405
        assert wrong.json()["code"] == "method_not_allowed"


@pytest.mark.parametrize(
    ("content", "field"),
    [
        (b'{"type": "x", "delay": 1, "key": "\\ud800"}', "key"),
        (b'{"type": "x", "delay": 1, "payload": {"a": ["\\udfff"]}}', "payload"),
        (b'{"type": "x", "delay": 1, "\\ud800": 1}', "body"),
    ],
    ids=["key", "payload", "field-name"],
)
def test_unpaired_surrogates_are_refused_naming_the_field(
    secured: tuple[Server, Tokens], content: bytes, field: str
) -> None:
    server, tokens = secured
    with server.client(tokens.alpha) as client:
        answer = client.post(
            "/v1/namespaces/alpha/timers",
            content=content,
            headers={"Content-Type": "application/json"},
        )
        assert answer.status_code == 400, answer.text
        assert answer.json()["code"] == "invalid_json"
        assert answer.json()["field"] == field


def test_a_method_not_allowed_names_every_method_of_the_path(
    secured: tuple[Server, Tokens],
) -> None:
    """405 says, in ``Allow``, the methods the document gives the path, all of them (a path
    served by several routes included: one per method, or a fast one beside the documented)
    and no others (a timer's key, which may hold a slash, does not make ``…/run-now`` a
    timer's path)."""
    server, tokens = secured
    with server.client(tokens.alpha) as client:
        paths = client.get("/openapi.json").json()["paths"]
        for path, operations in paths.items():
            documented = {method.upper() for method in operations}
            assert "OPTIONS" not in documented
            url = path.format(namespace="alpha", key="k", name="n", pattern="p")
            answer = client.options(url)
            assert answer.status_code == 405, (path, answer.text)
            assert answer.json()["code"] == "method_not_allowed"
            allowed = {method.strip() for method in answer.headers["allow"].split(",")}
            assert allowed - {"HEAD"} == documented, (path, allowed)


def test_an_empty_query_value_the_document_allows_is_taken(
    secured: tuple[Server, Tokens],
) -> None:
    """Where the document allows ``?name=`` (empty) the server takes it; where the server
    refuses it, the document says so (``minLength``) — client and server agree."""
    import jsonschema_rs

    server, tokens = secured
    with server.client(tokens.alpha) as client:
        document = client.get("/openapi.json").json()
        checked = 0
        for path, operations in document["paths"].items():
            if "get" not in operations or path.endswith("/live"):
                continue
            url = path.format(namespace="alpha", key="k", name="n", pattern="p")
            for parameter in operations["get"].get("parameters", []):
                if parameter["in"] != "query":
                    continue
                if not jsonschema_rs.is_valid(parameter["schema"], ""):
                    continue  # the document refuses it too
                checked += 1
                answer = client.get(url, params={parameter["name"]: ""})
                refused = answer.status_code == 422 and answer.json()["field"] == parameter["name"]
                assert not refused, (path, parameter["name"], answer.text)
        assert checked > 0
