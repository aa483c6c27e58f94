"""A "too many clients" refusal of the test server is explained by its real cause."""

from __future__ import annotations

import os

import pytest
from tests.pg_clients import ServerLoad, explain, held_connections, read_load

PG_URL = os.environ.get("DUETIME_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")


def test_the_explanation_names_the_limit_the_processes_and_what_to_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "4")
    text = explain("postgresql://db.example/test", 1, ServerLoad(max_connections=20, in_use=17))
    assert "too many clients" in text
    assert "max_connections=20" in text
    assert "17 were in use" in text
    assert "4 test process(es)" in text
    assert "DUETIME_TEST_PROCESSES=" in text
    assert "set DUETIME_TEST_PG" not in text


def test_the_connections_this_process_holds_are_counted() -> None:
    psycopg = pytest.importorskip("psycopg")
    try:
        first = psycopg.connect(PG_URL, connect_timeout=3)
    except psycopg.OperationalError as exc:
        pytest.skip(f"no PostgreSQL: {exc}")
    with first, psycopg.connect(PG_URL):
        port = first.info.port
        during = held_connections(port)
        load = read_load(first)
    assert during >= 2
    assert held_connections(port) == during - 2
    assert load.max_connections >= load.in_use >= 2
