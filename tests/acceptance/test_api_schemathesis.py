"""Property-based API testing with schemathesis: generated requests never get a 5xx.

Every operation of /openapi.json gets generated (valid and invalid) requests against a real
``duetime serve``; every answer must be a documented status with a documented body, and never a
server error. Half the cases keep the generated namespace (404/422 paths), half use an existing
one so bodies reach validation and the store.

A request whose generated headers break HTTP itself (a non-numeric ``Content-Length``) is
answered 400 by uvicorn's parser before the API sees it; that answer is accepted as it is.

One check is left out: ``positive_data_acceptance`` (schema-valid ⇒ 2xx). JSON Schema cannot say
"exactly one of at / delay / local / date", that a timezone must exist or that 2025-02-29 is
not a date, so schema-valid bodies are rightly refused with a 422 naming the field.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import Case, GenerationMode
from schemathesis.core.parameters import ParameterLocation
from schemathesis.specs.openapi.checks import positive_data_acceptance
from schemathesis.specs.openapi.schemas import OpenApiSchema

from duetime.api import ApiSettings, create_api
from duetime.config import Settings

from .test_api_serve import Server, make_server

MAX_EXAMPLES = 30
HTTP_REFUSAL = "Invalid HTTP request received."
"""uvicorn's answer (400) to a request its HTTP parser refuses, e.g. a generated
``content-length: GUvoa~`` header, before any application code runs."""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    server = make_server(tmp_path_factory.mktemp("schemathesis"))
    token = server.create_token("*")
    server.create_token("alpha")
    server.start("--no-worker")
    yield server, token
    assert server.stop() == 0, server.log()


@pytest.fixture(scope="module")
def api_schema(served: tuple[Server, str]) -> OpenApiSchema:
    server, _ = served
    return schemathesis.openapi.from_url(f"{server.base_url}/openapi.json")


STREAMS = {("GET", "/v1/namespaces/{namespace}/live")}
"""Answers that never end (server-sent events): tested in test_api_console.py instead."""


def _operations() -> list[tuple[str, str]]:
    """Every (method, path) of the document, read in-process: nothing is opened or served."""
    api = create_api(ApiSettings(core=Settings(database_url="sqlite:///never-opened.db")))
    return [
        (method.upper(), path)
        for path, methods in api.openapi()["paths"].items()
        for method in methods
        if (method.upper(), path) not in STREAMS
    ]


def _strategy(operation: Any) -> Any:
    """Schema-valid and schema-violating requests (the latter where the operation has inputs)."""
    strategy = operation.as_strategy(GenerationMode.POSITIVE)
    try:
        return strategy | operation.as_strategy(GenerationMode.NEGATIVE)
    except Exception:  # nothing to negate (no parameters, no body)
        return strategy


@pytest.mark.parametrize(("method", "path"), _operations())
def test_generated_requests_never_get_a_server_error(
    api_schema: OpenApiSchema, served: tuple[Server, str], method: str, path: str
) -> None:
    server, token = served
    headers = {"Authorization": f"Bearer {token}"}

    @given(case=_strategy(api_schema[path][method]))
    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def check(case: Case) -> None:
        # Steer only what the case did not deliberately break (negative components stay as made).
        meta = case.meta
        broken_path = meta is not None and meta.is_negative_at(ParameterLocation.PATH)
        broken_headers = meta is not None and meta.is_negative_at(ParameterLocation.HEADER)
        path_parameters = case.path_parameters or {}
        namespace = path_parameters.get("namespace")
        if namespace is not None and not broken_path and len(str(namespace)) % 2 == 0:
            path_parameters["namespace"] = "alpha"
        sent = None if broken_headers else headers
        response = case.call(base_url=server.base_url, headers=sent)
        if broken_headers and response.status_code == 400 and response.text == HTTP_REFUSAL:
            return  # headers no HTTP server accepts: the HTTP layer answered, the app never ran
        case.validate_response(response, excluded_checks=[positive_data_acceptance], headers=sent)

    check()


def test_the_schema_documents_every_operation(api_schema: OpenApiSchema) -> None:
    paths = set(api_schema.raw_schema["paths"])
    assert {
        "/v1/namespaces/{namespace}/timers",
        "/v1/namespaces/{namespace}/timers/{key}",
        "/v1/namespaces/{namespace}/events",
        "/v1/namespaces/{namespace}/dead",
        "/v1/namespaces/{namespace}/dead/{key}/replay",
        "/v1/namespaces/{namespace}/stats",
        "/v1/namespaces/{namespace}/activity",
        "/v1/namespaces/{namespace}/live",
        "/v1/namespaces/{namespace}/timers/bulk",
        "/v1/namespaces/{namespace}/timers/{key}/run-now",
        "/v1/namespaces/{namespace}/schedules",
        "/v1/namespaces/{namespace}/schedules/{name}",
        "/v1/namespaces/{namespace}/schedules/{name}/pause",
        "/v1/namespaces/{namespace}/schedules/{name}/resume",
        "/v1/preview",
        "/v1/namespaces",
        "/v1/nodes",
        "/healthz",
        "/metrics",
    } <= paths
    schemes = api_schema.raw_schema["components"]["securitySchemes"]
    assert schemes["HTTPBearer"]["scheme"] == "bearer"
