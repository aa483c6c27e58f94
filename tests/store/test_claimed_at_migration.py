"""Rows stored before claims recorded their own instant may read as claimed after they started
(the claim wrote the horizon it claimed up to). The migration that follows clamps such an
impossible claimed_at to the attempt's start, on both backends, and leaves true ones alone: the
attempt kept in the attempts table, and (PostgreSQL) the first one kept on its timer's row."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from storekit import NOW, PG_URL, StoreFactory, fresh_schema, new_timer, with_params

from duetime.model import FanOut, Finish, Outcome

LEASE = NOW + timedelta(seconds=30)
BEGAN = NOW + timedelta(milliseconds=1)
ENDED = NOW + timedelta(milliseconds=9)
HORIZON = NOW + timedelta(milliseconds=25)
"""What an earlier claim recorded: after the start."""

Execute = Callable[[str], None]


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Execute]]:
    """A store's URL, and a way to run SQL on its tables as an older version would."""
    if request.param == "sqlite":
        path = tmp_path / "old.db"

        def execute_sqlite(statement: str) -> None:
            with sqlite3.connect(path) as conn:
                conn.execute(statement)

        yield f"sqlite:///{path}", execute_sqlite
        return
    with fresh_schema() as schema:

        def execute_pg(statement: str) -> None:
            options = f"-c search_path={schema}"
            with psycopg.connect(PG_URL, autocommit=True, options=options) as conn:
                conn.execute(statement.encode())

        yield with_params(PG_URL, schema=schema), execute_pg


async def test_a_claimed_at_after_the_start_is_clamped_to_the_start(
    database: tuple[str, Execute], open_store: StoreFactory
) -> None:
    url, execute = database
    store = await open_store(url)
    keys = ("done", "retried", "lost", "true")
    await store.put_timers([new_timer(key, NOW, type="t") for key in keys], "error", NOW)
    claimed = {c.timer.key: c for c in await store.claim_due("ns", None, NOW, 10, "n1", LEASE)}
    finishes = [
        Finish(claimed["done"].timer.id, 1, Outcome.DONE, started_at=BEGAN),
        Finish(claimed["retried"].timer.id, 1, Outcome.RETRY, "e", LEASE, started_at=BEGAN),
        Finish(claimed["true"].timer.id, 1, Outcome.DEAD, "e", started_at=BEGAN),
    ]
    assert await store.finish(finishes, "n1", ENDED) == set()
    # As an earlier version stored them: claimed at its horizon, after the start (and the end).
    ended = ", ".join(str(claimed[key].timer.id) for key in ("done", "retried"))
    if url.startswith("sqlite"):
        micros = round(HORIZON.timestamp() * 1_000_000)
        execute(f"UPDATE attempts SET claimed_at = {micros} WHERE timer_id IN ({ended})")
        execute("DELETE FROM schema_migrations WHERE version = 19")
    else:
        horizon = HORIZON.isoformat()
        execute(f"UPDATE attempts SET claimed_at = '{horizon}' WHERE timer_id IN ({ended})")
        execute(f"UPDATE timers SET claimed_at = '{horizon}' WHERE id IN ({ended})")
        execute("DELETE FROM schema_migrations WHERE version = 28")
    await store.close()

    store = await open_store(url)  # applies the migration again
    read = {key: await store.list_attempts(claimed[key].timer.id) for key in keys}
    for key in ("done", "retried"):
        (attempt,) = read[key]
        assert (attempt.claimed_at, attempt.started_at, attempt.finished_at) == (
            BEGAN,
            BEGAN,
            ENDED,
        ), key
    (running,) = read["lost"]  # no start known: the claim's instant is all there is
    assert (running.claimed_at, running.started_at) == (NOW, None)
    (true,) = read["true"]
    assert (true.claimed_at, true.started_at, true.finished_at) == (NOW, BEGAN, ENDED)


async def test_an_attempt_claimed_by_an_earlier_version_ends_claimed_no_later_than_its_start(
    database: tuple[str, Execute], open_store: StoreFactory
) -> None:
    """Across an upgrade, a row an earlier version claimed (its horizon written as the claim's
    instant) is finished by this one: the attempt is recorded as claimed at its start at the
    latest, whichever way it ends (done, retried, handed on)."""
    url, execute = database
    store = await open_store(url)
    keys = ("done", "retried", "fanned")
    await store.put_timers([new_timer(key, NOW, type="t") for key in keys], "error", NOW)
    claimed = {c.timer.key: c for c in await store.claim_due("ns", None, NOW, 10, "n1", LEASE)}
    ids = ", ".join(str(c.timer.id) for c in claimed.values())
    if url.startswith("sqlite"):
        micros = round(HORIZON.timestamp() * 1_000_000)
        execute(f"UPDATE attempts SET claimed_at = {micros} WHERE timer_id IN ({ids})")
    else:
        horizon = HORIZON.isoformat()
        execute(
            f"UPDATE timers SET claimed_at = '{horizon}', updated_at = '{horizon}' "
            f"WHERE id IN ({ids})"
        )
    done, retried, fanned = (claimed[key].timer for key in keys)
    finishes = [
        Finish(done.id, 1, Outcome.DONE, claim_token=done.claim_token, started_at=BEGAN),
        Finish(
            retried.id,
            1,
            Outcome.RETRY,
            "e",
            LEASE,
            claim_token=retried.claim_token,
            started_at=BEGAN,
        ),
    ]
    assert await store.finish(finishes, "n1", ENDED) == set()
    out = FanOut(fanned.id, 1, "fanned", ("a",), fanned.claim_token)
    assert await store.fan_out([out], "n1", BEGAN) == set()
    for key in keys:
        (attempt,) = await store.list_attempts(claimed[key].timer.id)
        assert attempt.claimed_at == attempt.started_at == BEGAN, key
        assert attempt.finished_at is not None
        assert attempt.claimed_at <= attempt.started_at <= attempt.finished_at, key
