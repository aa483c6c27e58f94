"""Sealed at rest: what a copy of the database shows of payloads, deliveries and errors.

Each test reads the raw rows with plain SQL on the SQLite file or the PostgreSQL schema, as
someone holding only a backup would, and finds none of what was sealed; the store's own reads
give it back to a process holding the key, and say which key a process without it lacks.
"""

from __future__ import annotations

import base64
import sqlite3
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

import psycopg
from storekit import NOW, new_timer

from duetime.model import FanOut, Finish, Outcome, Page, Status, TimerFilter
from duetime.model.history import EventFilter
from duetime.store import Store
from duetime.store.postgres.settings import parse_url
from duetime.support import budgets
from duetime.support.budgets import Budget
from duetime.support.sealing import KeyRing, Sealing

T = TypeVar("T")

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


async def walk(
    list_page: Callable[[str | None], Awaitable[Page[T]]], page_bytes: int
) -> list[list[T]]:
    """Every page of a listing under a request's ``page_bytes``, first to last."""
    pages: list[list[T]] = []
    cursor = None
    with budgets.within(Budget(statement_timeout=30, connection_wait=30, page_bytes=page_bytes)):
        for _ in range(20):
            page = await list_page(cursor)
            pages.append(list(page.items))
            cursor = page.next_cursor
            if cursor is None:
                break
    return pages


async def test_a_byte_bounded_page_opens_what_it_keeps_and_counts_it_sealed(
    store: Store,
) -> None:
    """Under a request's ``page_bytes`` a listing page opens the sealed payloads and errors of
    the rows it keeps (decoded after the fetch: on PostgreSQL from the JSON text, on a thread),
    shows them as sealed to a process without the key, and counts each row at its length as
    stored: a sealed page holds fewer rows than a plain one of the same payloads."""
    store.sealing = Sealing(KeyRing.parse(K1), frozenset({"ns"}))
    big = {"text": "x" * 1000}
    error = f"KeyError: {EMAIL}"
    names = ("ns", "plain")
    timers = [new_timer(f"k{n}", namespace=ns, payload=big) for ns in names for n in range(4)]
    await store.put_timers(timers, "error", NOW)
    for ns in names:
        claimed = await store.claim_due(ns, None, NOW, 10, "n1", LEASE)
        dead = [
            Finish(
                c.timer.id,
                c.attempt,
                Outcome.DEAD,
                error=error,
                claim_token=c.timer.claim_token,
                started_at=NOW,  # as a worker reports it: when the event fired
            )
            for c in claimed
        ]
        assert await store.finish(dead, "n1", NOW) == set()

    def timers_of(ns: str) -> Callable[[str | None], Awaitable[Page[Any]]]:
        return lambda cursor: store.list_timers(ns, TimerFilter(), cursor, 100)

    def events_of(ns: str) -> Callable[[str | None], Awaitable[Page[Any]]]:
        return lambda cursor: store.history.list_events(ns, EventFilter(), cursor, 100)

    pages = await walk(timers_of("ns"), 1)
    assert [len(page) for page in pages] == [1, 1, 1, 1]
    assert all(t.payload == big and t.last_error == error for page in pages for t in page)
    events = await walk(events_of("ns"), 1)
    assert [len(page) for page in events] == [1, 1, 1, 1]
    for (event,) in events:
        assert event.timer.payload == big
        assert [a.error for a in event.deliveries] == [error]

    # The budget counts what was read, the sealed text: two plain rows fit where one sealed
    # row and a half do not.
    sealed_row = len(Sealing(KeyRing.parse(K1)).seal_payload("ns", '{"text":"' + "x" * 1000 + '"}'))
    budget = 2 * sealed_row - 200
    assert [len(page) for page in await walk(timers_of("plain"), budget)] == [2, 2]
    assert [len(page) for page in await walk(timers_of("ns"), budget)] == [1, 1, 1, 1]

    store.sealing = Sealing()  # a reader without the key
    pages = await walk(timers_of("ns"), 1)
    assert [(t.payload, t.last_error) for page in pages for t in page] == [
        ({"$sealed": "k1"}, "sealed")
    ] * 4
    events = await walk(events_of("ns"), 1)
    assert [e.timer.payload for (e,) in events] == [{"$sealed": "k1"}] * 4
    assert [a.error for (e,) in events for a in e.deliveries] == ["sealed"] * 4
