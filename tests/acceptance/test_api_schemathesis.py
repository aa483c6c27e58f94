"""Property-based API testing with schemathesis, as a tenant would try it: two namespaces, each
with a token scoped to it, and generated requests made with tenant A's token.

Every operation of /openapi.json gets generated requests, schema-valid and schema-violating,
against a real ``duetime serve``; then the stateful run follows the document's links (a
created timer fetched, cancelled, run now; a schedule paused…). Every answer must be a
documented status with a documented body and headers, never a server error, and never a 2xx
for tenant B's namespace: a third of the cases aim at A's own namespace, a third at B's (half
of those at B's real timer, schedule and limit), the rest keep the generated name (404s).

A request whose generated headers break HTTP itself (a non-numeric ``Content-Length``) is
answered 400 by uvicorn's parser before the API sees it; that answer is accepted as it is.

``positive_data_acceptance`` (a schema-valid request is never refused as invalid: no 400, 413
or 422) holds for every request but those whose payload holds a NUL character (refused, as the
document says in words: JSON Schema cannot say it of every string of "any JSON"), and every
operation but the three that take a schedule's rule: creating and
changing a schedule and previewing a rule. Their validity depends on what JSON Schema cannot
say: the current time (an ``end_at`` already past), the stored schedule (calendar options
need its recurrence rule) and the RFC 5545 grammar of ``rrule``. The document states those
rules in words; what it can say (one rule kind in a body and, as the exploded object ``rule``,
in the preview's query; calendar options only beside an ``rrule``) it says. A timer listing
whose ``cursor`` belongs to another ``sort`` is not held to it either: two parameters no
schema relates.

``use_after_free`` (a deleted resource answers 404) is left out: ``DELETE`` on a pending timer
cancels it, and the cancelled timer stays readable with its history, as documented (a second
``DELETE`` answers the same; only ``POST …/purge`` deletes it).
"""

from __future__ import annotations

import sqlite3
import zlib
from collections import Counter
from collections.abc import Iterator
from contextlib import closing
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import FlakyStrategyDefinition
from schemathesis import Case, GenerationMode
from schemathesis.core.parameters import ParameterLocation
from schemathesis.specs.openapi.checks import (
    negative_data_rejection,
    positive_data_acceptance,
    use_after_free,
)
from schemathesis.specs.openapi.schemas import OpenApiSchema

from duetime.api import ApiSettings, create_api
from duetime.config import Settings

from .test_api_serve import Server, make_server

pytestmark = pytest.mark.slow  # a thousand generated requests and linked sequences

MAX_EXAMPLES = 30
STATEFUL_EXAMPLES = 15
STATEFUL_STEPS = 6
OWN, FOREIGN = "alpha", "beta"
FOREIGN_TIMER, FOREIGN_SCHEDULE, FOREIGN_LIMIT = "b-timer", "b-schedule", "b.*"
EXCLUDED = [use_after_free]
RULE_OPERATIONS = {
    ("POST", "/v1/namespaces/{namespace}/schedules"),
    ("PATCH", "/v1/namespaces/{namespace}/schedules/{name}"),
    ("GET", "/v1/preview"),
    # A range reversed, reaching into the future on the database's clock, or holding more than
    # 10,000 occurrences without `yes`: what no JSON Schema can say of two fields or a clock.
    ("POST", "/v1/namespaces/{namespace}/schedules/{name}/backfill"),
}
"""Where schema-valid requests may be refused (see the module's docstring)."""
HTTP_REFUSAL = "Invalid HTTP request received."
"""uvicorn's answer (400) to a request its HTTP parser refuses, e.g. a generated
``content-length: GUvoa~`` header, before any application code runs."""

SENT: Counter[str] = Counter()
"""Requests sent, by operation (``-s`` prints the totals when the module ends)."""
AIMED: Counter[str] = Counter()
"""Requests sent, by the namespace they aimed at."""


class Tenants:
    """The server, and a token scoped to each of the two namespaces."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.own = server.issue_token(OWN).secret  # each makes its namespace, as the command does
        self.foreign = server.issue_token(FOREIGN).secret


@pytest.fixture(scope="module")
def tenants(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tenants]:
    server = make_server(tmp_path_factory.mktemp("schemathesis"))
    tenants = Tenants(server)
    server.start("--no-worker")
    _seed_foreign(tenants)
    yield tenants
    assert server.stop() == 0, server.log()
    print(f"\nschemathesis: {sum(SENT.values())} requests, {len(SENT)} operations, {dict(AIMED)}")
    if SENT:  # the isolation check had something to check
        assert AIMED[OWN] > 0, AIMED
        assert AIMED[FOREIGN] > 0, AIMED


def _seed_foreign(tenants: Tenants) -> None:
    """Tenant B's own things, for A's requests to aim at."""
    base = f"/v1/namespaces/{FOREIGN}"
    with tenants.server.client(tenants.foreign) as client:
        for path, body, method in (
            (f"{base}/timers", {"type": "b.paid", "key": FOREIGN_TIMER, "delay": 86400}, "POST"),
            (f"{base}/schedules", {"name": FOREIGN_SCHEDULE, "type": "b.tick", "every": 3600},
             "POST"),
            (f"{base}/limits/{FOREIGN_LIMIT}", {"concurrency": 1}, "PUT"),
        ):  # fmt: skip
            answer = client.request(method, path, json=body)
            assert answer.status_code < 300, answer.text


@pytest.fixture(scope="module")
def api_schema(tenants: Tenants) -> OpenApiSchema:
    return schemathesis.openapi.from_url(f"{tenants.server.base_url}/openapi.json")


@schemathesis.check
def no_cross_tenant_success(ctx: Any, response: Any, case: Case) -> bool | None:
    """Tenant A's token never succeeds on tenant B's namespace, nor sees it listed."""
    namespace = (case.path_parameters or {}).get("namespace")
    if 200 <= response.status_code < 300:
        assert namespace != FOREIGN, f"{case.method} {case.formatted_path}: 2xx on B's namespace"
        assert FOREIGN not in response.text, f"{case.method} {case.formatted_path} shows B's name"
    return None


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


def _aim(case: Case) -> None:
    """Point the case at A's namespace, at B's (half the time at B's real things), or leave the
    generated name; what the case deliberately broke stays broken."""
    meta = case.meta
    if meta is not None and meta.is_negative_at(ParameterLocation.PATH):
        return
    parameters = case.path_parameters or {}
    namespace = parameters.get("namespace")
    if namespace is None:
        return
    choice = zlib.crc32(repr(sorted(parameters.items())).encode()) % 6
    if choice < 2:
        parameters["namespace"] = OWN
    elif choice < 4:
        parameters["namespace"] = FOREIGN
        if choice == 3:
            for name, value in (
                ("key", FOREIGN_TIMER),
                ("name", FOREIGN_SCHEDULE),
                ("pattern", FOREIGN_LIMIT),
            ):
                if name in parameters:
                    parameters[name] = value
    aimed = parameters["namespace"]
    AIMED[aimed if aimed in (OWN, FOREIGN) else "generated"] += 1


def _excluded(case: Case) -> list[Any]:
    """The checks left out for this case's operation (or for this case)."""
    excluded = list(EXCLUDED)
    if (
        (case.method.upper(), case.operation.path) in RULE_OPERATIONS
        or _foreign_cursor(case)
        or _holds_nul(case.body.get("payload") if isinstance(case.body, dict) else None)
    ):
        excluded.append(positive_data_acceptance)
    if _unmutated(case):
        excluded.append(negative_data_rejection)
    return excluded


def _unmutated(case: Case) -> bool:
    """A case of the schema-violating mode that schemathesis could not violate: its phase says
    "Positive test case" and lists no mutation. It is a valid request, rightly taken, and the
    check that invalid ones are refused does not apply to it."""
    meta = case.meta
    if meta is None or meta.generation.mode.is_positive:
        return False
    data = meta.phase.data
    return getattr(data, "description", None) == "Positive test case" and not getattr(
        data, "mutations", ()
    )


def _holds_nul(value: object) -> bool:
    """Whether a payload has a NUL character in a string or a key: refused (422 naming
    ``payload``) because no store can keep it (PostgreSQL's JSON cannot), as the document says
    in words; a JSON Schema for "any JSON" cannot say it of every nested string."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, list):
        return any(_holds_nul(item) for item in value)
    if isinstance(value, dict):
        return any("\x00" in key or _holds_nul(item) for key, item in value.items())
    return False


def _foreign_cursor(case: Case) -> bool:
    """A timer listing's cursor of another order than its ``sort`` (``id.…`` is the newest
    first's): each parameter is valid, the pair is not, and a query string's schema cannot
    relate two parameters. The server refuses it naming ``cursor``."""
    query = case.query or {}
    cursor, sort = query.get("cursor"), query.get("sort") or "newest"
    if case.operation.path != "/v1/namespaces/{namespace}/timers" or not cursor:
        return False
    kind = str(cursor).partition(".")[0]
    return kind != ("id" if sort == "newest" else sort)


def _headers(tenants: Tenants, case: Case) -> dict[str, str] | None:
    meta = case.meta
    if meta is not None and meta.is_negative_at(ParameterLocation.HEADER):
        return None
    return {"Authorization": f"Bearer {tenants.own}"}


@pytest.mark.parametrize(("method", "path"), _operations())
def test_generated_requests_are_answered_as_documented(
    api_schema: OpenApiSchema, tenants: Tenants, method: str, path: str
) -> None:
    @given(case=_strategy(api_schema[path][method]))
    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def check(case: Case) -> None:
        _aim(case)
        sent = _headers(tenants, case)
        response = case.call(base_url=tenants.server.base_url, headers=sent)
        SENT[f"{method} {path}"] += 1
        if sent is None and response.status_code == 400 and response.text == HTTP_REFUSAL:
            return  # headers no HTTP server accepts: the HTTP layer answered, the app never ran
        case.validate_response(
            response,
            excluded_checks=_excluded(case),
            additional_checks=[no_cross_tenant_success],
            headers=sent,
        )

    check()


def _empty_own_namespace(tenants: Tenants) -> None:
    """Each stateful scenario starts from the same A: what an earlier one created is gone.

    Hypothesis replays a scenario's choices and expects the same draws; a link draws among
    the values earlier answers gave, so a key an earlier scenario left behind (a 409 where
    there had been a 201) changes what there is to draw from, and Hypothesis stops on its
    own inconsistency instead of testing the server. B's namespace keeps its fixed things."""
    database = tenants.server.cwd / "duetime.db"
    with closing(sqlite3.connect(database, timeout=10)) as conn, conn:
        mine = "SELECT id FROM timers WHERE namespace = ?"
        conn.execute(f"DELETE FROM attempts WHERE timer_id IN ({mine})", (OWN,))
        conn.execute(f"DELETE FROM timer_moves WHERE timer_id IN ({mine})", (OWN,))
        for table in ("timers", "schedules", "flow_limits", "audit_log"):
            conn.execute(f"DELETE FROM {table} WHERE namespace = ?", (OWN,))


def test_linked_requests_are_answered_as_documented(
    api_schema: OpenApiSchema, tenants: Tenants
) -> None:
    """The stateful run: sequences that follow the document's links."""
    machine = api_schema.as_state_machine()

    class Tenant(machine):  # type: ignore[misc,valid-type]
        def setup(self) -> None:
            _empty_own_namespace(tenants)

        def before_call(self, case: Case) -> None:
            _aim(case)

        def get_call_kwargs(self, case: Case) -> dict[str, Any]:
            return {"base_url": tenants.server.base_url, "headers": _headers(tenants, case)}

        def after_call(self, response: Any, case: Case) -> None:
            SENT[f"{case.method} {case.path} (stateful)"] += 1

        def validate_response(self, response: Any, case: Case, **kwargs: Any) -> None:
            if response.status_code == 400 and response.text == HTTP_REFUSAL:
                return
            case.validate_response(
                response,
                excluded_checks=_excluded(case),
                additional_checks=[no_cross_tenant_success],
                headers=_headers(tenants, case),
            )

    run_settings = settings(
        max_examples=STATEFUL_EXAMPLES,
        stateful_step_count=STATEFUL_STEPS,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    try:
        Tenant.run(settings=run_settings)
    except FlakyStrategyDefinition as flaky:
        # schemathesis decides whether a step follows a link's value with a random source
        # Hypothesis does not record (``st.randoms(use_true_random=True)`` in its stateful
        # module, with probabilities it tunes as the run goes): the same recorded draws can
        # send another request, get another answer and enable other rules, and Hypothesis
        # stops on its own consistency check. Nothing about the server is judged by that
        # stop, so the run is made once more, from a fresh start; a second stop fails.
        print(f"\nschemathesis: the stateful run is made again after {flaky!r}")
        Tenant.run(settings=run_settings)


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
