"""A full test server ("too many clients") is reported as full, not as a wrong address.

A private cluster with two connection slots, both taken: the suite's PostgreSQL probe waits
for a slot, then fails the test naming the server's limit and what to do, instead of skipping
it with a hint to set ``DUETIME_TEST_PG``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from pg_cluster import PgCluster, cluster_problem

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

import storekit

pytestmark = pytest.mark.slow  # a private PostgreSQL cluster of its own


@pytest.fixture
def full_cluster() -> Iterator[PgCluster]:
    problem = cluster_problem()
    if problem is not None:
        message = f"cannot run a private PostgreSQL cluster: {problem}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    made = PgCluster.create(max_connections="3", superuser_reserved_connections="1")
    try:
        made.start()
        yield made
    finally:
        made.remove()


def test_a_full_server_fails_the_test_naming_its_limit_not_the_url(
    full_cluster: PgCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = full_cluster.url()
    monkeypatch.setattr(storekit, "PG_URL", url)
    monkeypatch.setattr(storekit, "FULL_SERVER_WAIT", 0.0)
    monkeypatch.setattr(storekit, "_checked", [])
    monkeypatch.setattr(storekit, "_load", [])
    assert storekit._pg_problem() is None  # a slot free: its limit is read
    assert storekit._load[0].max_connections == 3
    monkeypatch.setattr(storekit, "_checked", [])
    taken: list[psycopg.Connection[tuple[object, ...]]] = []
    try:
        # Every slot, the reserved one too (the test user is a superuser).
        taken += [psycopg.connect(url, connect_timeout=10) for _ in range(3)]
        with pytest.raises(psycopg.OperationalError, match="too many clients"):
            psycopg.connect(url, connect_timeout=10).close()
        with pytest.raises(pytest.fail.Exception) as failed:
            storekit.require_pg()
        held = len(taken)
    finally:
        for conn in taken:
            conn.close()
    message = str(failed.value)
    assert "too many clients" in message
    assert "max_connections=3" in message
    assert f"hold {held} connection(s)" in message
    assert "DUETIME_TEST_PROCESSES=" in message
    assert "set DUETIME_TEST_PG" not in message
    assert storekit._pg_problem() is None  # asked again once slots are free
