"""A write whose connection is lost while it commits says that its outcome is unknown.

The server's backend is terminated (as a crash or a failover would end it) while the write
waits, deterministically: a trigger in the test's own schema waits on an advisory lock this test
holds. A deferred trigger waits at COMMIT — the write may or may not have been stored, and the
error says so; an immediate one waits inside the INSERT, before any COMMIT was sent — nothing
was stored, and the error is a plain StoreUnavailable.
"""

from __future__ import annotations

import asyncio
import random

import psycopg
import pytest
from storekit import NOW, PG_URL, StoreFactory, new_timer
from tests.waiting import poll

from duetime.errors import CommitOutcomeUnknown, StoreUnavailable
from duetime.model import NewTimer

pytestmark = pytest.mark.usefixtures("pg_schema")


def _connect(schema: str) -> psycopg.Connection:
    return psycopg.connect(PG_URL, autocommit=True, options=f"-c search_path={schema}")


def _add_waiting_trigger(schema: str, lock: int, *, deferred: bool) -> None:
    when = "DEFERRABLE INITIALLY DEFERRED" if deferred else "NOT DEFERRABLE"
    with _connect(schema) as conn:
        conn.execute(
            f"""
            CREATE FUNCTION wait_for_test() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                PERFORM pg_advisory_xact_lock({lock});
                RETURN NULL;
            END $$;
            CREATE CONSTRAINT TRIGGER wait_for_test AFTER INSERT ON timers
                {when} FOR EACH ROW EXECUTE FUNCTION wait_for_test();
            """
        )


def _terminate_the_waiter(lock: int) -> None:
    """End the backend waiting for ``lock`` (waiting for it to be there first)."""
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        row = poll(
            lambda: conn.execute(
                "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                " AND ((classid::bigint << 32) | objid::bigint) = %s",
                (lock,),
            ).fetchone(),
            60,
            "the write to reach the trigger",
            every=0.01,
        )
        conn.execute("SELECT pg_terminate_backend(%s)", row)


@pytest.mark.parametrize(
    ("keys", "deferred", "unknown"),
    [
        (["k"], True, True),  # one keyed timer: the pipelined write, committed by its sync
        (["k", "j"], True, True),  # several: a transaction of its own, and its COMMIT
        (["k", "j"], False, False),  # lost inside the INSERT: no COMMIT was ever sent
    ],
)
def test_a_connection_lost_at_commit_leaves_the_outcome_unknown(
    pg_url: str,
    pg_schema: str,
    open_store: StoreFactory,
    runner: asyncio.Runner,
    keys: list[str],
    deferred: bool,
    unknown: bool,
) -> None:
    store = runner.run(open_store(pg_url))
    lock = random.randrange(1, 2**62)
    _add_waiting_trigger(pg_schema, lock, deferred=deferred)
    timers: list[NewTimer] = [new_timer(key, type="t") for key in keys]
    with psycopg.connect(PG_URL, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (lock,))

        async def write() -> BaseException | None:
            putting = asyncio.ensure_future(store.put_timers(timers, "error", NOW))
            await asyncio.to_thread(_terminate_the_waiter, lock)
            try:
                await putting
            except BaseException as exc:
                return exc
            return None

        failure = runner.run(write())
    assert isinstance(failure, StoreUnavailable)
    assert failure.outcome_unknown is unknown
    assert isinstance(failure, CommitOutcomeUnknown) is unknown
    if unknown:
        assert "may have been stored" in failure.message
        assert "retrying with the same keys is safe" in failure.message
    # Retrying with the same keys resolves it (here the terminated transaction stored nothing).
    with _connect(pg_schema) as conn:
        conn.execute("DROP TRIGGER wait_for_test ON timers")
    results = runner.run(store.put_timers(timers, "keep", NOW))
    assert [r.action for r in results] == ["created"] * len(keys)
