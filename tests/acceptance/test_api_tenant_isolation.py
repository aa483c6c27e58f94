"""One tenant cannot stall the others: ``duetime serve`` as a user runs it, on PostgreSQL.

A request whose statements hang holds a pooled connection only until ``statement_timeout``; a
request that finds every connection taken is answered 503 with ``Retry-After`` within
``connection_wait`` instead of hanging; and SIGTERM stops the server within its shutdown grace
whatever its requests are doing. The database is made to hang for real: another session locks
the table the listing reads.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import httpx
import psycopg
import pytest

from .test_api_serve import Server, make_server, wait_for

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from storekit import PG_URL, pooled_schema, with_params

pytestmark = pytest.mark.slow  # waits out statement timeouts and a shutdown grace

LIMITS = "/v1/namespaces/default/limits"
STATEMENT_TIMEOUT = 4.0
CONNECTION_WAIT = 0.3
GRACE = 3.0


@pytest.fixture
def schema() -> Iterator[str]:
    with pooled_schema() as name:
        yield name


def pg_server(tmp_path: Path, schema: str, *, pool_max: int, **env: str) -> Server:
    server = make_server(tmp_path)
    url = with_params(PG_URL, schema=schema, pool_min="1", pool_max=str(pool_max))
    server.env.update(DUETIME_DATABASE_URL=url, DUETIME_SHUTDOWN_GRACE=str(GRACE), **env)
    return server


def waiting_on_locks(schema: str) -> int:
    """Statements of the server's sessions waiting for a lock (on this test's schema)."""
    with psycopg.connect(PG_URL) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND application_name = 'duetime' AND query LIKE '%%flow_limits%%' "
            "AND pid <> pg_backend_pid() AND datname = current_database() "
            "AND EXISTS (SELECT 1 FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE l.pid = pg_stat_activity.pid "
            "AND NOT l.granted AND n.nspname = %s)",
            [schema],
        ).fetchone()
    assert row is not None
    return int(row[0])


def locked_limits(schema: str) -> psycopg.Connection[tuple[object, ...]]:
    """A session holding an exclusive lock on the limits table until it is closed."""
    conn = psycopg.connect(PG_URL)
    conn.execute(f"LOCK TABLE {schema}.flow_limits IN ACCESS EXCLUSIVE MODE")
    return conn


def test_a_full_pool_answers_503_at_once_and_a_hung_statement_ends(
    tmp_path: Path, schema: str
) -> None:
    server = pg_server(
        tmp_path,
        schema,
        pool_max=2,
        DUETIME_STATEMENT_TIMEOUT=str(STATEMENT_TIMEOUT),
        DUETIME_CONNECTION_WAIT=str(CONNECTION_WAIT),
    )
    server.start("--no-worker")
    lock = locked_limits(schema)
    try:
        with ThreadPoolExecutor(2) as pool, server.client() as client:
            slow = [pool.submit(client.get, LIMITS, timeout=60) for _ in range(2)]
            wait_for(lambda: waiting_on_locks(schema) >= 2, timeout=20)
            started = time.monotonic()
            busy = client.get("/v1/namespaces/default/timers", timeout=60)
            took = time.monotonic() - started
            print(f"\nwith every connection held: {busy.status_code} in {took * 1000:.0f} ms")
            assert busy.status_code == 503, busy.text
            assert busy.json()["code"] == "store_busy"
            assert busy.headers["Retry-After"] == "1"
            # answered on the connection wait, not once a hung statement let go
            assert took < STATEMENT_TIMEOUT
            for answer in slow:
                ended = answer.result()
                assert ended.status_code == 503, ended.text
                assert "statement_timeout" in ended.json()["message"]
        lock.close()  # the connections the timeouts freed serve again
        with server.client() as client:
            after = client.get("/v1/namespaces/default/timers")
            assert after.status_code == 200, after.text
    finally:
        lock.close()
        assert server.stop() == 0, server.log()


def test_sigterm_stops_the_server_within_its_grace_while_a_request_hangs(
    tmp_path: Path, schema: str
) -> None:
    server = pg_server(tmp_path, schema, pool_max=4, DUETIME_STATEMENT_TIMEOUT="600")
    server.start("--no-worker")
    lock = locked_limits(schema)
    try:
        with ThreadPoolExecutor(1) as pool, server.client() as client:
            hung: Future[httpx.Response] = pool.submit(client.get, LIMITS, timeout=120)
            wait_for(lambda: waiting_on_locks(schema) >= 1, timeout=20)
            assert server.process is not None
            started = time.monotonic()
            code = server.stop(timeout=60)
            took = time.monotonic() - started
            print(f"\nstopped in {took:.1f} s with a hung request (grace {GRACE} s)")
            assert code == 0, server.log()
            assert took <= GRACE + 2.0, server.log()
            with pytest.raises(httpx.HTTPError):
                hung.result().raise_for_status()
    finally:
        lock.close()
