"""Requests whose trouble is the caller's (or a passing busy moment) never answer 500: a payload
filter no database can compare is a 422 naming it, on both stores; a busy database while the
guard re-reads whether auth is on is a 503 with ``Retry-After``; and the API built from the
environment (``uvicorn --factory duetime.api:app_from_env``) checks ``Host`` and ``Origin``
as ``duetime serve`` does."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from duetime.api import ApiSettings, app_from_env, create_api
from duetime.api import service as service_module
from duetime.api.guard import allowed_hosts_for
from duetime.config import Settings
from duetime.store.postgres.store import PostgresStore
from duetime.store.sqlite.database import READERS
from duetime.store.sqlite.store import SqliteStore
from duetime.support import budgets
from duetime.support.budgets import Budget

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from storekit import pooled_pg_url

TIMERS = "/v1/namespaces/default/timers"
LOCAL = "http://127.0.0.1:8080"


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'faults.db'}"
        return
    with pooled_pg_url() as url:
        yield url


BAD_PAYLOAD_FILTERS = {
    "a whole number of 400 digits": "n=" + "9" * 400,
    "a number beyond a float": "n=1e999",
    "a negative one": "n=-1e999",
    "a NUL in a JSON string": 'n="a\\u0000b"',
    "a NUL in plain text": "n=a\x00b",
}


@pytest.mark.parametrize("text", BAD_PAYLOAD_FILTERS.values(), ids=list(BAD_PAYLOAD_FILTERS))
def test_a_payload_filter_no_database_compares_is_a_422_naming_it(
    database_url: str, text: str
) -> None:
    settings = ApiSettings(core=Settings(database_url=database_url), auth=False)
    with TestClient(create_api(settings)) as client:
        assert client.post(TIMERS, json={"type": "x", "delay": "P1D", "payload": {"n": 1}})
        answer = client.get(TIMERS, params={"payload": text})
        assert answer.status_code == 422, answer.text
        assert (answer.json()["code"], answer.json()["field"]) == ("invalid_input", "payload")
        bulk = client.post(
            f"{TIMERS}/bulk", json={"action": "cancel", "payload": text, "dry_run": True}
        )
        assert bulk.status_code == 422, bulk.text
        assert bulk.json()["field"] == "payload"
        fine = client.get(TIMERS, params={"payload": "n=9223372036854775807"})
        assert fine.status_code == 200, fine.text


@pytest.fixture(params=["sqlite", "postgres"])
def one_connection_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database whose requests can all be kept waiting: SQLite's readers, or a PostgreSQL
    pool of one connection."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'guard.db'}"
        return
    with pooled_pg_url(pool_min="1", pool_max="1") as url:
        yield url


async def _hold_sqlite(
    store: SqliteStore, entered: threading.Event, release: threading.Event
) -> None:
    def run(conn: sqlite3.Connection) -> None:
        entered.set()
        release.wait(30)

    with budgets.within(Budget(statement_timeout=30, connection_wait=30)):
        await store._db.read(run)  # on a reader of requests


async def _hold_postgres(
    store: PostgresStore, entered: threading.Event, release: threading.Event
) -> None:
    pool = store._db._pool
    assert pool is not None
    async with pool.connection():
        entered.set()
        await asyncio.to_thread(release.wait, 30)


def test_a_busy_database_while_the_guard_rereads_auth_is_503(
    one_connection_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every connection the requests use is held (as other tenants' long reads would) while
    the guard must re-read whether a token exists: the request hears 503 ``store_busy`` with
    ``Retry-After``, and the next one, once the database is free, is answered."""
    monkeypatch.setattr(service_module, "AUTH_TTL", 0.0)  # re-read on every request
    core = Settings(database_url=one_connection_url)
    api = create_api(ApiSettings(core=core, allowed_hosts=allowed_hosts_for("127.0.0.1")))
    release = threading.Event()
    with TestClient(api, base_url=LOCAL) as client:
        assert client.get(TIMERS).status_code == 200
        assert client.portal is not None
        store = api.state.duetime.store
        holders = []
        try:
            if isinstance(store, SqliteStore):
                for _ in range(READERS):
                    entered = threading.Event()
                    holders.append(
                        client.portal.start_task_soon(_hold_sqlite, store, entered, release)
                    )
                    assert entered.wait(30)
            else:
                assert isinstance(store, PostgresStore)
                entered = threading.Event()
                holders.append(
                    client.portal.start_task_soon(_hold_postgres, store, entered, release)
                )
                assert entered.wait(30)
            answer = client.get(TIMERS)
        finally:
            release.set()
            for holder in holders:
                holder.result(30)
        assert answer.status_code == 503, answer.text
        assert answer.json()["code"] == "store_busy"
        assert answer.headers["Retry-After"] == "1"
        assert answer.headers["X-Frame-Options"] == "DENY"
        assert client.get(TIMERS).status_code == 200


@pytest.mark.parametrize("env_host", ["", "10.1.2.3"])
def test_the_api_from_the_environment_checks_host_and_origin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env_host: str
) -> None:
    monkeypatch.setenv("DUETIME_DATABASE_URL", f"sqlite:///{tmp_path / 'env.db'}")
    monkeypatch.setenv("DUETIME_ALLOWED_HOSTS", "timers.internal other.internal")
    monkeypatch.delenv("DUETIME_AUTH", raising=False)
    if env_host:
        monkeypatch.setenv("DUETIME_HOST", env_host)
    else:
        monkeypatch.delenv("DUETIME_HOST", raising=False)
    body = {"type": "x", "delay": "P1D", "key": "csrf"}
    with TestClient(app_from_env(), base_url=LOCAL) as client:
        cross_site = client.post(TIMERS, json=body, headers={"Origin": "http://evil.example"})
        assert cross_site.status_code == 403, cross_site.text
        assert cross_site.json()["code"] == "origin_not_allowed"
        rebound = client.get(TIMERS, headers={"Host": "evil.example"})
        assert rebound.status_code == 400
        assert rebound.json()["code"] == "host_not_allowed"
        for host in ("timers.internal", "other.internal", env_host or "localhost"):
            assert client.get(TIMERS, headers={"Host": host}).status_code == 200, host
        own = client.post(TIMERS, json={**body, "key": "own"}, headers={"Origin": LOCAL})
        assert own.status_code == 201, own.text
        keys = [t["key"] for t in client.get(TIMERS).json()["items"]]
        assert keys == ["own"]
