"""Sealed at rest: what a copy of the database shows of payloads, deliveries and errors.

Each test reads the raw rows with plain SQL on the SQLite file or the PostgreSQL schema, as
someone holding only a backup would, and finds none of what was sealed; the store's own reads
give it back to a process holding the key, and say which key a process without it lacks.
"""

from __future__ import annotations

import base64
import sqlite3
from datetime import timedelta

import psycopg
from storekit import NOW, new_timer

from duetime.model import FanOut, Finish, Outcome, Status
from duetime.store import Store
from duetime.store.postgres.settings import parse_url
from duetime.support.sealing import KeyRing, Sealing

LEASE = NOW + timedelta(seconds=30)
K1 = f"k1:{base64.b64encode(b'1' * 32).decode()}"
K2 = f"k2:{base64.b64encode(b'2' * 32).decode()}"
EMAIL = "alice@example.com"
TOKEN = "tok-7f3a9c"
PAYLOAD = {"email": EMAIL, "token": TOKEN}


def raw_rows(url: str) -> str:
    """Every row of every table, as text, read with SQL alone."""
    found: list[str] = []
    if url.startswith("sqlite"):
        with sqlite3.connect(url[len("sqlite:///") :]) as conn:
            tables = [
                r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            ]
            for table in tables:
                found.extend(repr(row) for row in conn.execute(f'SELECT * FROM "{table}"'))
        return "\n".join(found)
    settings = parse_url(url)
    with psycopg.connect(settings.conninfo) as pg:
        tables = pg.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
            (settings.schema,),
        ).fetchall()
        for (table,) in tables:
            rows = pg.execute(f'SELECT t::text FROM {settings.schema}."{table}" t').fetchall()
            found.extend(row[0] for row in rows)
    return "\n".join(found)


async def test_payloads_deliveries_and_errors_are_sealed_in_the_rows(
    store: Store, store_url: str
) -> None:
    store.sealing = Sealing(KeyRing.parse(K1))
    await store.put_timers(
        [
            new_timer("job", payload=PAYLOAD, max_attempts=3),
            new_timer("event", payload=PAYLOAD, type="signup"),
        ],
        "error",
        NOW,
    )
    claimed = {c.timer.key: c for c in await store.claim_due("ns", None, NOW, 10, "n1", LEASE)}
    assert claimed["job"].timer.payload == PAYLOAD
    assert claimed["job"].problem is None
    job = claimed["job"]
    failed = Finish(
        job.timer.id,
        job.attempt,
        Outcome.RETRY,
        error=f"KeyError: {EMAIL}",
        run_at=NOW + timedelta(minutes=1),
        traceback=f'File "h.py", line 3\n    send({TOKEN!r})',
        claim_token=job.timer.claim_token,
    )
    assert await store.finish([failed], "n1", NOW) == set()
    event = claimed["event"]
    fan = FanOut(event.timer.id, event.attempt, "event", ("hook",), event.timer.claim_token)
    assert await store.fan_out([fan], "n1", NOW) == set()

    raw = raw_rows(store_url)
    assert "dts1:k1:" in raw  # the rows are there, sealed
    for secret in (EMAIL, TOKEN):
        assert secret not in raw

    timer = await store.get_timer("ns", "job")
    assert timer is not None
    assert timer.payload == PAYLOAD
    assert timer.last_error == f"KeyError: {EMAIL}"
    (attempt,) = await store.list_attempts(timer.id)
    assert attempt.error == f"KeyError: {EMAIL}"
    assert TOKEN in (attempt.traceback or "")
    delivered = await store.claim_due("ns", None, NOW, 10, "n1", LEASE)
    assert [c.timer.payload for c in delivered] == [PAYLOAD]
    assert delivered[0].timer.destination == "hook"


async def test_a_claim_without_the_key_names_it_and_a_reader_sees_sealed(store: Store) -> None:
    store.sealing = Sealing(KeyRing.parse(K1))
    await store.put_timers([new_timer("old", payload=PAYLOAD)], "error", NOW)
    store.sealing = Sealing(KeyRing.parse(K2))
    await store.put_timers([new_timer("new", payload=PAYLOAD)], "error", NOW)

    old = await store.get_timer("ns", "old")
    assert old is not None
    assert old.payload == {"$sealed": "k1"}
    claimed = {c.timer.key: c for c in await store.claim_due("ns", None, NOW, 10, "n1", LEASE)}
    assert claimed["new"].problem is None
    assert claimed["new"].timer.payload == PAYLOAD
    problem = claimed["old"].problem or ""
    assert "'k1'" in problem
    assert "DUETIME_SEAL_KEYS" in problem


async def test_a_namespace_not_sealed_stays_readable(store: Store, store_url: str) -> None:
    store.sealing = Sealing(KeyRing.parse(K1), frozenset({"billing"}))
    await store.put_timers(
        [new_timer("a", payload=PAYLOAD), new_timer("b", payload=PAYLOAD, namespace="billing")],
        "error",
        NOW,
    )
    raw = raw_rows(store_url)
    assert raw.count(EMAIL) == 1  # namespace ns only
    billing = await store.get_timer("billing", "b")
    assert billing is not None
    assert billing.payload == PAYLOAD
    assert billing.status is Status.SCHEDULED
