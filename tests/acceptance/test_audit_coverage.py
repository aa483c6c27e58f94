"""Every state-changing operation of the REST API writes one audit entry: the test walks the
OpenAPI document, so a route added later without an entry (or without a line in
:data:`AUDITED`) fails here. On SQLite and PostgreSQL, in-process, with auth on.

``python tests/acceptance/test_audit_coverage.py`` prints the table; docs/audit.md has it too,
and :func:`test_the_documented_table_is_the_one_checked` keeps the two alike.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from duetime import AsyncApp, Dead, Event
from duetime.api import ApiSettings, create_api
from duetime.config import Settings
from duetime.support import eventloop

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from storekit import pooled_pg_url

STATE_CHANGING = ("post", "put", "patch", "delete")
NS = "/v1/namespaces/{namespace}"

AUDITED: dict[tuple[str, str], str] = {
    ("POST", "/v1/namespaces"): "namespace_create",
    ("POST", f"{NS}/timers"): "schedule",
    ("PATCH", f"{NS}/timers/{{key}}"): "edit",
    ("POST", f"{NS}/timers/{{key}}/run-now"): "run_now",
    ("DELETE", f"{NS}/timers/{{key}}"): "cancel",
    ("POST", f"{NS}/timers/{{key}}/purge"): "delete",
    ("POST", f"{NS}/timers/bulk"): "bulk_cancel",
    ("POST", f"{NS}/events"): "emit",
    ("POST", f"{NS}/dead/{{key}}/replay"): "replay",
    ("POST", f"{NS}/schedules"): "schedule_define",
    ("PATCH", f"{NS}/schedules/{{name}}"): "schedule_change",
    ("POST", f"{NS}/schedules/{{name}}/run-next"): "schedule_run_next",
    ("POST", f"{NS}/schedules/{{name}}/pause"): "schedule_pause",
    ("POST", f"{NS}/schedules/{{name}}/resume"): "schedule_resume",
    ("DELETE", f"{NS}/schedules/{{name}}"): "schedule_delete",
    ("PUT", f"{NS}/limits/{{pattern}}"): "limit_set",
    ("DELETE", f"{NS}/limits/{{pattern}}"): "limit_remove",
    ("POST", f"{NS}/pause"): "pause",
    ("POST", f"{NS}/resume"): "resume",
}
"""Each state-changing operation of the OpenAPI document, and the action its entry names (with
the request below: ``DELETE …/timers/{key}`` cancels a pending timer, ``…/purge`` deletes the
finished one it left; ``…/timers/bulk`` writes ``bulk_<action>``)."""

CONSOLE_ONLY = {("POST", f"{NS}/timers"), ("POST", f"{NS}/events")}
"""Written when the console sends them (an operator made the timer); an application's own
timers and events are their own record, and an entry for each would double the cost of the
busiest routes."""

REQUESTS: dict[tuple[str, str], tuple[dict[str, str], Any]] = {
    ("POST", "/v1/namespaces"): ({}, {"name": "{namespace}-new"}),
    ("POST", f"{NS}/timers"): ({}, {"type": "made.here", "key": "new-1", "delay": "P1D"}),
    ("PATCH", f"{NS}/timers/{{key}}"): ({"key": "edit-me"}, {"delay": "P3D"}),
    ("POST", f"{NS}/timers/{{key}}/run-now"): ({"key": "run-me"}, None),
    ("DELETE", f"{NS}/timers/{{key}}"): ({"key": "cancel-me"}, None),
    ("POST", f"{NS}/timers/{{key}}/purge"): ({"key": "cancel-me"}, None),
    ("POST", f"{NS}/timers/bulk"): ({}, {"action": "cancel", "keys": ["bulk-1", "bulk-2"]}),
    ("POST", f"{NS}/events"): ({}, {"type": "said.here", "key": "ev-1"}),
    ("POST", f"{NS}/dead/{{key}}/replay"): ({"key": "dead-1"}, None),
    ("POST", f"{NS}/schedules"): ({}, {"name": "weekly", "type": "w", "cron": "0 9 * * 1"}),
    ("PATCH", f"{NS}/schedules/{{name}}"): ({"name": "nightly"}, {"payload": {"v": 2}}),
    ("POST", f"{NS}/schedules/{{name}}/run-next"): ({"name": "nightly"}, None),
    ("POST", f"{NS}/schedules/{{name}}/pause"): ({"name": "nightly"}, None),
    ("POST", f"{NS}/schedules/{{name}}/resume"): ({"name": "nightly"}, None),
    ("DELETE", f"{NS}/schedules/{{name}}"): ({"name": "weekly"}, None),
    ("PUT", f"{NS}/limits/{{pattern}}"): ({"pattern": "email.*"}, {"concurrency": 3}),
    ("DELETE", f"{NS}/limits/{{pattern}}"): ({"pattern": "email.*"}, None),
    ("POST", f"{NS}/pause"): ({}, {"pattern": "report.*"}),
    ("POST", f"{NS}/resume"): ({}, {"pattern": "report.*"}),
}
"""What the test sends for each, in this order (each acts on what the seed or one before
made)."""


def table() -> str:
    """The operations checked, one line each: ``METHOD path -> action``."""
    width = max(len(f"{method} {path}") for method, path in AUDITED)
    lines = []
    for (method, path), action in AUDITED.items():
        note = " (from the console)" if (method, path) in CONSOLE_ONLY else ""
        lines.append(f"{f'{method} {path}':<{width}}  ->  {action}{note}")
    return "\n".join(lines)


def state_changing(document: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (method.upper(), path)
        for path, operations in document["paths"].items()
        for method in operations
        if method in STATE_CHANGING
    ]


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with contextlib.ExitStack() as schemas:
        if request.param == "postgres":
            yield schemas.enter_context(pooled_pg_url())
        else:
            yield f"sqlite:///{tmp_path / 'audit.db'}"


async def seed(url: str, namespace: str) -> str:
    """Pending ``edit-me``, ``run-me``, ``cancel-me``, ``bulk-1``, ``bulk-2``; dead
    ``dead-1``; schedule ``nightly``; a token ``ops`` for every namespace (its secret)."""
    async with AsyncApp(database_url=url, namespace=namespace) as app:

        @app.handler("doomed")
        def refuse(event: Event) -> None:
            raise Dead("refused")

        await app.schedule("doomed", key="dead-1", delay=0)
        await app.tick()
        for key in ("edit-me", "run-me", "cancel-me", "bulk-1", "bulk-2"):
            await app.schedule("later", key=key, delay="P1D")
        await app.schedules.add("nightly", "night", cron="0 3 * * *")
        if namespace.endswith("console"):
            return (await app.tokens.issue(["*"], name="ops")).secret
        return ""


def entries(client: TestClient, namespace: str) -> list[dict[str, Any]]:
    answer = client.get(f"/v1/namespaces/{namespace}/audit", params={"limit": 1000})
    assert answer.status_code == 200, answer.text
    items: list[dict[str, Any]] = answer.json()["items"]
    return items


def walk(client: TestClient, namespace: str, headers: dict[str, str], via: str) -> list[str]:
    """Send every request of :data:`REQUESTS`; the operations whose entry was not as it must
    be, each with why."""
    wrong = []
    for (method, path), (params, body) in REQUESTS.items():
        url = path.replace("{namespace}", namespace).format(**params)
        sent = None if body is None else _filled(body, namespace)
        where = sent["name"] if path == "/v1/namespaces" else namespace
        before = len(entries(client, where)) if path != "/v1/namespaces" else 0
        answer = client.request(method, url, json=sent, headers=headers)
        assert answer.status_code < 300, (method, url, answer.text)
        after = entries(client, where)
        new = after[: len(after) - before]
        expected = AUDITED[(method, path)]
        if via == "api" and (method, path) in CONSOLE_ONLY:
            if new:
                wrong.append(f"{method} {path}: written without the console: {new}")
            continue
        got = [(e["action"], e["actor"], e["via"], e["count"] >= 1) for e in new]
        if got != [(expected, "token:ops", via, True)]:
            wrong.append(f"{method} {path}: wanted one {expected!r} by token:ops via {via}: {got}")
    return wrong


def _filled(body: dict[str, Any], namespace: str) -> dict[str, Any]:
    return {
        name: value.replace("{namespace}", namespace) if isinstance(value, str) else value
        for name, value in body.items()
    }


def test_every_state_changing_operation_writes_one_entry(database_url: str, tmp_path: Path) -> None:
    secret = eventloop.run(seed(database_url, "shop-console"))
    eventloop.run(seed(database_url, "shop-api"))
    api = create_api(ApiSettings(core=Settings(database_url=database_url)))
    with TestClient(api) as client:
        operations = state_changing(client.get("/openapi.json").json())
        unknown = [op for op in operations if op not in AUDITED]
        assert not unknown, f"state-changing operations with no audit action known: {unknown}"
        assert not [op for op in operations if op not in REQUESTS]
        assert set(AUDITED) == set(operations), "AUDITED names an operation that is gone"

        client.headers["Authorization"] = f"Bearer {secret}"
        console = {"X-Duetime-Client": "console"}
        assert walk(client, "shop-console", console, "console") == []
        assert walk(client, "shop-api", {}, "api") == []


def test_the_documented_table_is_the_one_checked() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "audit.md").read_text()
    for (method, path), action in AUDITED.items():
        row = f"| `{method} {path}` | `{action}`"
        assert row in page, f"docs/audit.md lacks the row {row!r}"


if __name__ == "__main__":  # pragma: no cover - prints the table for docs/audit.md
    print(table())
