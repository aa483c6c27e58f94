"""/openapi.json agrees with the server: what the document allows is taken, what the server
refuses the document refuses too, so a client generated from it never sends a request the
server answers 422.

Each format's pattern is checked against the parser that reads it (values drawn from the
pattern are all accepted), each rule between fields against the schema (the body the server
refuses is invalid there), and each formerly disagreeing request is sent to a real app.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from duetime.api import ApiSettings, create_api
from duetime.config import Settings
from duetime.errors import InvalidInput
from duetime.event_filters import instant_or_ago
from duetime.formats import (
    CRON_PATTERN,
    DATE_PATTERN,
    DURATION_PATTERN,
    EVERY_PATTERN,
    EXPIRES_PATTERN,
    GRACE_PATTERN,
    INSTANT_PATTERN,
    LOCAL_PATTERN,
    PAYLOAD_MATCH_PATTERN,
    WHEN_PATTERN,
    identifier_pattern,
)
from duetime.model.cursors import EVENT_CURSOR_PATTERN, ID_CURSOR_PATTERN, NAME_CURSOR_PATTERN
from duetime.schedules import parse_instant
from duetime.store.cursors import (
    decode_cursor,
    decode_event_cursor,
    decode_name_cursor,
    encode_cursor,
    encode_event_cursor,
    encode_name_cursor,
)
from duetime.timemath.durations import parse_duration
from duetime.timemath.recurrence import parse_recurrence
from duetime.timemath.recurrence.overlap import parse_catch_up_grace
from duetime.timemath.when import resolve_when
from duetime.timer_filters import payload_match
from duetime.validation import check_expires_after, check_key, check_subject

NOW = datetime(2026, 5, 1, 12, tzinfo=UTC)
NS = "/v1/namespaces/default"
PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))


def drawn(pattern: str) -> st.SearchStrategy[str]:
    return st.from_regex(pattern, fullmatch=True, alphabet=st.characters(codec="utf-8"))


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    path: Path = tmp_path_factory.mktemp("document") / "duetime.db"
    api = create_api(ApiSettings(core=Settings(database_url=f"sqlite:///{path}")))
    with TestClient(api) as client:
        assert client.post("/v1/namespaces", json={"name": "default"}).status_code < 300
        yield client


@pytest.fixture(scope="module")
def document(client: TestClient) -> dict[str, Any]:
    answer: dict[str, Any] = client.get("/openapi.json").json()
    return answer


def body_schema(document: dict[str, Any], path: str, method: str) -> Any:
    operation = document["paths"][path][method]
    return operation["requestBody"]["content"]["application/json"]["schema"]


def valid(schema: Any, value: Any) -> bool:
    return bool(jsonschema_rs.validator_for(schema).is_valid(value))


# The formats: every value a pattern admits, the parser takes.


def test_the_date_pattern_is_the_calendar() -> None:
    pattern = re.compile(DATE_PATTERN)
    for year in (*range(1968, 2030), 2100, 2400, 3200, 4000, 8996, 8997, 8998, 8999, 9000):
        for month in range(1, 13):
            for day in range(1, 32):
                text = f"{year:04d}-{month:02d}-{day:02d}"
                exists = day <= calendar.monthrange(year, month)[1]
                inside = 1971 <= year <= 8998
                assert bool(pattern.fullmatch(text)) == (exists and inside), text


@PROPERTY
@given(drawn(INSTANT_PATTERN))
def test_every_instant_the_pattern_allows_is_read(text: str) -> None:
    assert parse_instant(text, "after") is not None
    resolve_when(now=NOW, at=text)


@PROPERTY
@given(drawn(LOCAL_PATTERN), drawn(DATE_PATTERN))
def test_every_wall_time_and_day_the_patterns_allow_are_read(local: str, day: str) -> None:
    resolve_when(now=NOW, local=local, timezone="Asia/Tokyo", disambiguation="later")
    resolve_when(now=NOW, date=day, timezone="America/New_York")


@PROPERTY
@given(drawn(WHEN_PATTERN))
def test_every_filter_bound_the_pattern_allows_is_read(text: str) -> None:
    instant_or_ago(text, NOW, "since")


@PROPERTY
@given(drawn(PAYLOAD_MATCH_PATTERN))
def test_every_payload_filter_the_pattern_allows_is_read(text: str) -> None:
    try:
        payload_match(text)
    except InvalidInput as exc:  # only what a pattern cannot say: a value's range
        refused = exc.message
    else:
        return
    assert "out of range" in refused or "NUL" in refused, refused


@PROPERTY
@given(drawn(DURATION_PATTERN), drawn(EXPIRES_PATTERN))
def test_every_delay_and_expiry_the_patterns_allow_are_read(delay: str, expires: str) -> None:
    resolve_when(now=NOW, delay=delay, timezone="Europe/Berlin")
    assert check_expires_after(expires) is not None


@PROPERTY
@given(drawn(EVERY_PATTERN), drawn(GRACE_PATTERN), drawn(CRON_PATTERN))
def test_every_interval_grace_and_cron_the_patterns_allow_are_read(
    every: str, grace: str, cron: str
) -> None:
    parse_recurrence(every=every, now=NOW)
    parse_catch_up_grace(grace)
    parse_recurrence(cron=cron, timezone="America/New_York", on_gap="skip", now=NOW)


@PROPERTY
@given(drawn(identifier_pattern()).filter(lambda text: len(text) <= 255))
def test_every_identifier_the_pattern_allows_is_a_key_and_a_subject(text: str) -> None:
    assert check_key(text) == text
    assert check_subject(text) == text


def test_the_identifier_pattern_refuses_what_identifiers_refuse() -> None:
    pattern = re.compile(identifier_pattern())
    for text in ("", " ", "\u3000", "a\x1bb", "a\nb", "\x85", "a\u2028"):
        assert pattern.fullmatch(text) is None, repr(text)


def test_a_duration_never_passes_the_hundred_years() -> None:
    longest = "P9Y99M999W9999DT99999H999999M99999999.999999S"
    assert re.fullmatch(DURATION_PATTERN, longest)
    parse_duration(longest, "delay")


# Cursors: plain text a pattern describes, every match a place in its listing.


@PROPERTY
@given(drawn(ID_CURSOR_PATTERN), drawn(EVENT_CURSOR_PATTERN), drawn(NAME_CURSOR_PATTERN))
def test_every_cursor_the_patterns_allow_is_a_place(ids: str, events: str, names: str) -> None:
    decode_cursor(ids)
    decode_event_cursor(events)
    decode_name_cursor(names)


def test_issued_cursors_match_their_patterns_and_read_back() -> None:
    fired = datetime(2026, 3, 1, 9, 30, 0, 123456, tzinfo=UTC)
    assert re.fullmatch(ID_CURSOR_PATTERN, encode_cursor(42))
    assert decode_cursor(encode_cursor(42)) == 42
    assert re.fullmatch(EVENT_CURSOR_PATTERN, encode_event_cursor(fired, 7))
    assert decode_event_cursor(encode_event_cursor(fired, 7)) == (fired, 7)
    assert re.fullmatch(NAME_CURSOR_PATTERN, encode_name_cursor("birthday:user-42"))
    assert decode_name_cursor(encode_name_cursor("birthday:user-42")) == "birthday:user-42"


# The rules between fields, said by the schema.


def test_the_document_has_no_reference_it_cannot_resolve(document: dict[str, Any]) -> None:
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            reference = node.get("$ref")
            if isinstance(reference, str) and not reference.startswith("#/components/"):
                found.append(reference)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(document)
    assert found == []


@pytest.mark.parametrize(
    ("path", "method", "body"),
    [
        (f"{NS}/timers", "post", {"type": "a", "at": "2026-01-01T00:00:00Z", "delay": 90}),
        (f"{NS}/timers", "post", {"type": "a"}),
        (f"{NS}/timers", "post", {"type": "a", "local": "2026-01-01T09:00"}),
        (f"{NS}/timers", "post", {"type": "a", "delay": 1, "timezone": "Mars/Olympus"}),
        (f"{NS}/events", "post", {"type": "a", "subject": ""}),
        (f"{NS}/events", "post", {"type": "a", "key": "a\x1bb"}),
        (f"{NS}/schedules", "post", {"name": "n", "type": "a", "cron": "@daily", "every": 60}),
        (f"{NS}/schedules", "post", {"name": "n", "type": "a"}),
        (f"{NS}/schedules/{{name}}", "patch", {}),
        (f"{NS}/schedules/{{name}}", "patch", {"cron": "@daily", "every": 60}),
        (f"{NS}/limits/{{pattern}}", "put", {"burst": 1, "concurrency": 1}),
        (f"{NS}/limits/{{pattern}}", "put", {"partition_by": "subject", "rate": "5/s"}),
        (f"{NS}/limits/{{pattern}}", "put", {}),
        ("/v1/namespaces", "post", {"name": ""}),
        ("/v1/namespaces", "post", {"name": "Shop"}),
        (f"{NS}/timers/bulk", "post", {"action": "cancel", "filter": {"due_from": "0"}}),
        (f"{NS}/timers/bulk", "post", {"action": "cancel", "filter": {"payload": "paid"}}),
        (f"{NS}/timers/bulk", "post", {"action": "cancel", "filter": {"payload": "a=[1]"}}),
        (f"{NS}/timers/{{key}}", "patch", {}),
        (f"{NS}/timers/{{key}}", "patch", {"at": "2030-01-01T00:00:00Z", "delay": 60}),
        (f"{NS}/timers/{{key}}", "patch", {"local": "2030-01-01T09:00"}),
        (f"{NS}/timers/{{key}}", "patch", {"at": "soon"}),
        (f"{NS}/timers/{{key}}", "patch", {"at": None}),
        (f"{NS}/timers/{{key}}", "patch", {"timezone": "Mars/Olympus"}),
        (f"{NS}/timers/{{key}}", "patch", {"disambiguation": None}),
        (f"{NS}/schedules", "post", {"name": "n", "type": "a", "every": 60, "roll": "skip"}),
        (f"{NS}/schedules", "post", {"name": "n", "type": "a", "every": 60, "feb29": "mar1"}),
        (f"{NS}/schedules", "post", {"name": "n", "type": "a", "rrule": "FREQ=DAILY"}),
    ],
)
def test_a_body_the_server_refuses_is_invalid_in_the_document(
    client: TestClient, document: dict[str, Any], path: str, method: str, body: Any
) -> None:
    template = path.replace(NS, "/v1/namespaces/{namespace}")
    assert not valid(body_schema(document, template, method), body)
    url = path.format(name="n", pattern="a.*", key="k")
    if url.endswith("/timers/k"):  # a pending timer to edit, so only the body is refused
        client.post(f"{NS}/timers", json={"type": "a", "key": "k", "delay": 3600})
    answer = client.request(method.upper(), url, json=body)
    assert answer.status_code in (404, 422), answer.text


@pytest.mark.parametrize(
    ("path", "method", "body"),
    [
        (f"{NS}/timers", "post", {"type": "a", "local": "2026-07-01T09:00", "date": None,
                                  "timezone": "Asia/Tokyo"}),
        (f"{NS}/events", "post", {"type": "a", "max_attempts": 3.0, "priority": 1.0}),
        (f"{NS}/schedules", "post", {"name": "n", "type": "a", "cron": "@daily",
                                     "every": None, "timezone": None}),
        (f"{NS}/limits/{{pattern}}", "put", {"concurrency": 2.0, "rate": None}),
    ],
)  # fmt: skip
def test_a_body_the_document_allows_is_taken(
    client: TestClient, document: dict[str, Any], path: str, method: str, body: Any
) -> None:
    template = path.replace(NS, "/v1/namespaces/{namespace}")
    assert valid(body_schema(document, template, method), body)
    answer = client.request(method.upper(), path.format(pattern="a.*"), json=body)
    assert answer.status_code < 300, answer.text


@pytest.mark.parametrize(
    ("path", "query"),
    [
        (f"{NS}/events", {"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"}),
        (f"{NS}/timers", {"due_from": "PT1H", "due_until": "P1D"}),
        (f"{NS}/timers", {"cursor": "id.99999999999999999999"[:22]}),
        (f"{NS}/dead", {"cursor": "id.0000000000000000000"}),
        (f"{NS}/events", {"cursor": "event.999999999999999999.1"}),
        (f"{NS}/schedules", {"cursor": "name.=+@"}),
        ("/v1/preview", {"cron": "*/5 3 28 2 6", "timezone": "Pacific/Chatham"}),
    ],
)
def test_a_query_the_document_allows_is_taken(
    client: TestClient, document: dict[str, Any], path: str, query: dict[str, str]
) -> None:
    template = path.replace(NS, "/v1/namespaces/{namespace}")
    parameters = {p["name"]: p["schema"] for p in document["paths"][template]["get"]["parameters"]}
    exploded = {name: value for name, value in query.items() if name not in parameters}
    for name, value in query.items():
        if name in parameters:
            assert valid(parameters[name], value), (name, value)
    if exploded:  # the properties of an object parameter (the preview's rule)
        assert valid(parameters["rule"], exploded), exploded
    answer = client.get(path, params=query)
    assert answer.status_code == 200, answer.text


def test_a_preview_names_exactly_one_rule(client: TestClient, document: dict[str, Any]) -> None:
    """A schema relates properties of one value, never two parameters: the preview's cron,
    every and rrule are documented as the exploded object ``rule`` (the same query string),
    which says that exactly one of them is given."""
    parameters = document["paths"]["/v1/preview"]["get"]["parameters"]
    (rule,) = [p for p in parameters if p["name"] == "rule"]
    assert (rule["in"], rule["style"], rule["explode"], rule["required"]) == (
        "query",
        "form",
        True,
        True,
    )
    assert not {"cron", "every", "rrule"} & {p["name"] for p in parameters}
    refused = [{}, {"cron": "@daily", "every": "PT5M"}, {"every": "60", "rrule": "FREQ=DAILY"}]
    for query in refused:
        assert not valid(rule["schema"], query), query
        assert client.get("/v1/preview", params=query).status_code == 422, query
    for query in ({"cron": "@daily"}, {"every": "PT5M"}):
        assert valid(rule["schema"], query), query
        assert client.get("/v1/preview", params=query).status_code == 200, query


def test_a_date_the_calendar_lacks_is_invalid_in_the_document(document: dict[str, Any]) -> None:
    schema = body_schema(document, "/v1/namespaces/{namespace}/timers", "post")
    assert not valid(schema, {"type": "a", "date": "2027-02-29"})
    assert valid(schema, {"type": "a", "date": str(date(2028, 2, 29))})
