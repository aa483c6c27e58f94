"""What an idle node's periodic rounds send its database, counted, never timed.

The wake-up listener's liveness probe is a pipeline's sync alone (a query, even ``SELECT 1``,
is a transaction in ``pg_stat_database``).
"""

from __future__ import annotations

import asyncio

import psycopg
import pytest
from storekit import PG_URL

from duetime.store.postgres.wakeup import probe


async def test_the_listeners_probe_runs_no_statement() -> None:
    conn = await psycopg.AsyncConnection.connect(PG_URL, autocommit=True)
    admin = await psycopg.AsyncConnection.connect(PG_URL, autocommit=True)
    try:
        await conn.execute('LISTEN "duetime_probe_test"')
        pid = conn.info.backend_pid

        async def last_statement() -> str:
            row = await (
                await admin.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", [pid])
            ).fetchone()
            assert row is not None
            return str(row[0])

        assert await last_statement() == 'LISTEN "duetime_probe_test"'
        for _ in range(3):
            await probe(conn)
        # The server answered, and ran nothing: its last statement is still the LISTEN.
        assert await last_statement() == 'LISTEN "duetime_probe_test"'

        await admin.execute("SELECT pg_terminate_backend(%s)", [pid])
        with pytest.raises(psycopg.OperationalError):  # a dead line is still found out
            await asyncio.wait_for(probe(conn), 5)
    finally:
        await conn.close()
        await admin.close()
