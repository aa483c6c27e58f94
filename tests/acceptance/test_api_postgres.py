"""``duetime serve`` and ``duetime tokens`` on PostgreSQL: the same flows as on SQLite.

The server runs on a schema of its own (``?schema=<unique>``, from the pool of migrated
schemas, see tests/store/schema_pool.py). Skipped when
PostgreSQL cannot be reached (failed under CI), like the store conformance suite.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from .test_api_serve import Server, make_server, wait_for

# The PostgreSQL probe lives beside the store tests; pytest does not put it on sys.path.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from storekit import pooled_pg_url

pytestmark = pytest.mark.slow  # real `duetime serve` on PostgreSQL

NS = "/v1/namespaces/shop"


@pytest.fixture
def pg_server(tmp_path: Path) -> Iterator[Server]:
    """A server (not started) whose DUETIME_DATABASE_URL is a PostgreSQL schema of its own."""
    with pooled_pg_url() as url:
        server = make_server(tmp_path)
        server.env["DUETIME_DATABASE_URL"] = url
        try:
            yield server
        finally:
            server.stop()


def tokens_cli(server: Server, *args: str) -> object:
    done = server.cli("tokens", *args, "--json")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return json.loads(done.stdout)


def test_tokens_create_ls_revoke_on_postgres(pg_server: Server) -> None:
    created = tokens_cli(pg_server, "create", "--namespace", "shop", "--name", "ci")
    assert isinstance(created, dict)
    assert created["token"].startswith("dt_")
    assert (created["namespaces"], created["name"], created["read_only"]) == (["shop"], "ci", False)
    listed = tokens_cli(pg_server, "ls")
    assert isinstance(listed, dict)
    assert [t["id"] for t in listed["items"]] == [created["id"]]
    assert "token" not in listed["items"][0]
    revoked = tokens_cli(pg_server, "revoke", str(created["id"]))
    assert isinstance(revoked, dict)
    assert revoked["revoked_at"] is not None
    assert tokens_cli(pg_server, "ls") == {"items": [], "next_cursor": None}
    again = pg_server.cli("tokens", "revoke", str(created["id"]), "--json")
    assert again.returncode != 0
    assert json.loads(again.stderr.splitlines()[-1])["code"] == "conflict"


def test_serve_on_postgres_with_a_token_fires_a_timer(pg_server: Server) -> None:
    token = pg_server.issue_token("shop").secret  # in process: the test above runs the command
    read_only = pg_server.issue_token("shop", read_only=True).secret
    pg_server.start("--app", "handlers:app")
    with pg_server.client() as anonymous:
        assert anonymous.get("/v1/info").json()["auth"] is True  # tokens exist: auth is on
        assert anonymous.get(f"{NS}/timers").status_code == 401
    with pg_server.client(read_only) as reader:
        denied = reader.post(f"{NS}/timers", json={"type": "followup.email", "delay": 0})
        assert denied.status_code == 403, denied.text
    due = datetime.now(UTC) + timedelta(seconds=1)
    body = {"type": "followup.email", "key": "pg-1", "at": due.isoformat()}
    with pg_server.client(token) as client:
        answer = client.post(f"{NS}/timers", json=body)
        assert answer.status_code == 201, answer.text
        assert answer.json()["timer"]["status"] == "scheduled"
        wait_for(lambda: pg_server.fired() == ["pg-1"], timeout=15)
        wait_for(
            lambda: client.get(f"{NS}/timers/pg-1").json()["timer"]["status"] == "done",
            timeout=10,
        )
        assert client.get("/v1/namespaces").json()["items"] == ["shop"]
    listed = tokens_cli(pg_server, "ls")
    assert isinstance(listed, dict)
    used = {t["id"]: t["last_used_at"] for t in listed["items"]}
    assert all(value is not None for value in used.values()), used
    assert pg_server.stop() == 0, pg_server.log()
