"""Exactly-once effects: a transactional handler's writes commit with its timer's completion.

And the outbox pattern: timers scheduled inside the caller's own PostgreSQL transaction exist
only if it commits (every kind of caller's transaction: tests/integration/test_outbox_*.py).
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from storekit import StoreFactory, new_timer
from tests.waiting import until

from duetime import AsyncApp, Dead, Event, FrozenClock, InvalidInput, Status, TimerRequest
from duetime.errors import StoreUnavailable
from duetime.model import Claimed, Finish, Outcome
from duetime.store import Store
from duetime.store.postgres.store import PostgresStore

START = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def make_app(store: Store, clock: FrozenClock) -> AsyncApp:
    return AsyncApp(store.url, "shop", store=store, clock=clock)


async def prepare_effects_table(store: Store, backend: str) -> None:
    if backend == "sqlite":
        with sqlite3.connect(store.url.removeprefix("sqlite:///")) as conn:
            conn.execute("CREATE TABLE fx (key TEXT NOT NULL)")
    else:
        async with await psycopg.AsyncConnection.connect(store.url.split("?")[0]) as conn:
            schema = store.url.split("schema=")[1]
            await conn.execute(f"CREATE TABLE {schema}.fx (key text NOT NULL)")
            await conn.commit()


async def effect_rows(app: AsyncApp, backend: str) -> list[str]:
    page = await app.timers.history(limit=10)
    assert page.items is not None
    store = app.store
    if backend == "sqlite":
        with sqlite3.connect(store.url.removeprefix("sqlite:///")) as conn:
            return [row[0] for row in conn.execute("SELECT key FROM fx ORDER BY key")]
    schema = store.url.split("schema=")[1]
    async with await psycopg.AsyncConnection.connect(store.url.split("?")[0]) as conn:
        cur = await conn.execute(f"SELECT key FROM {schema}.fx ORDER BY key")
        return [row[0] for row in await cur.fetchall()]


async def test_writes_and_completion_commit_together(store: Store, backend: str) -> None:
    await prepare_effects_table(store, backend)
    clock = FrozenClock(START)
    app = make_app(store, clock)
    calls: list[str] = []

    if backend == "sqlite":

        @app.handler("order.paid", transactional=True)
        def record(event: Event, conn: Any) -> None:
            calls.append(event.key)
            conn.execute("INSERT INTO fx (key) VALUES (?)", (event.key,))
            if event.payload.get("fail"):
                raise RuntimeError("card declined")
            if event.payload.get("dead"):
                raise Dead("no such order")

    else:

        @app.handler("order.paid", transactional=True)
        async def record(event: Event, conn: Any) -> None:
            calls.append(event.key)
            await conn.execute("INSERT INTO fx (key) VALUES (%s)", (event.key,))
            if event.payload.get("fail"):
                raise RuntimeError("card declined")
            if event.payload.get("dead"):
                raise Dead("no such order")

    await app.open()
    await app.schedule("order.paid", {}, delay=0, key="ok")
    await app.schedule("order.paid", {"fail": True}, delay=0, key="fails", max_attempts=3)
    await app.schedule("order.paid", {"dead": True}, delay=0, key="dead")
    stats = await app.tick()
    assert stats.outcomes == {"done": 1, "retry": 1, "dead": 1}
    assert sorted(calls) == ["dead", "fails", "ok"]
    # Only the completed attempt's write survived: the others rolled back with their attempt.
    assert await effect_rows(app, backend) == ["ok"]
    assert (await app.get("ok")).status is Status.DONE
    assert [a.outcome for a in await app.timers.attempts("ok")] == ["done"]
    failing = await app.get("fails")
    assert failing.status is Status.RETRYING
    assert failing.last_error == "RuntimeError: card declined"
    assert (await app.get("dead")).status is Status.DEAD


async def test_a_taken_over_attempt_writes_nothing(store: Store, backend: str) -> None:
    await prepare_effects_table(store, backend)
    clock = FrozenClock(START)
    app = make_app(store, clock)
    await app.open()
    await app.schedule("order.paid", {}, delay=0, key="k")
    (claimed,) = await store.claim_due("shop", None, clock.now(), 10, "old-node", clock.now())
    await store.rescue(clock.now().replace(year=2026))  # the lease ran out: taken over

    def effect(conn: Any) -> Any:
        raise AssertionError("must not run for an attempt that is no longer ours")

    assert not await store.transactions.complete_in_transaction(
        claimed.timer.id, claimed.attempt, "old-node", clock.now(), effect
    )
    assert await effect_rows(app, backend) == []
    assert (await app.get("k")).status is Status.RETRYING


async def test_scheduling_inside_the_callers_transaction(store: Store, backend: str) -> None:
    clock = FrozenClock(START)
    app = make_app(store, clock)
    await app.open()
    if backend == "sqlite":  # its sqlite3 outbox: tests/integration/test_outbox_sqlite.py
        with pytest.raises(InvalidInput) as info:
            await app.schedule("x", delay=5, key="k", transaction=object())
        assert info.value.field == "transaction"
        return
    async with await psycopg.AsyncConnection.connect(store.url.split("?")[0]) as conn:
        async with conn.transaction():
            await app.schedule("order.paid", {"n": 1}, delay=5, key="kept", transaction=conn)
            await app.emit("order.noted", {"n": 2}, key="emitted", transaction=conn)
        try:
            async with conn.transaction():
                await app.schedule("order.paid", {}, delay=5, key="gone", transaction=conn)
                await app.emit("order.noted", {}, key="gone-event", transaction=conn)
                raise RuntimeError("the caller's own work failed")
        except RuntimeError:
            pass
        # The caller's search_path is left as it was.
        cur = await conn.execute("SELECT current_setting('search_path')")
        row = await cur.fetchone()
        assert row is not None
        assert store.url.split("schema=")[1] not in row[0]
    assert (await app.get("kept")).payload == {"n": 1}
    assert (await app.get("emitted")).payload == {"n": 2}
    page = await app.timers.history()
    assert sorted(t.key for t in page.items) == ["emitted", "kept"]
    async with await psycopg.AsyncConnection.connect(store.url.split("?")[0]) as conn:
        # A batch longer than one statement, in the caller's transaction too.
        batch = [TimerRequest("order.paid", {"n": n}, delay=5, key=f"b{n}") for n in range(250)]
        try:
            async with conn.transaction():
                await app.timers.schedule_many(batch, transaction=conn)
                raise RuntimeError("the caller's own work failed")
        except RuntimeError:
            pass
        assert await app.store.get_timer("shop", "b0") is None
        async with conn.transaction():
            results = await app.timers.schedule_many(batch, transaction=conn)
        assert [r.timer.key for r in results] == [f"b{n}" for n in range(250)]
        # A batch refused half-way leaves the caller's transaction as it was, free to commit.
        async with conn.transaction():
            await app.schedule("order.paid", {}, delay=5, key="mine", transaction=conn)
            refused = [*batch[:200], TimerRequest("order.paid", {}, delay=5, timezone="Mars/X")]
            with pytest.raises(InvalidInput) as info:
                await app.timers.schedule_many(
                    [replace(r, key=f"r{n}") for n, r in enumerate(refused)], transaction=conn
                )
            assert info.value.field == "[200].timezone"
        assert (await app.get("mine")).key == "mine"
        assert await app.store.get_timer("shop", "r0") is None
    assert await app.get("b249") == results[249].timer
    with pytest.raises(InvalidInput) as info:
        await app.schedule("x", delay=5, key="k", transaction="not a connection")
    assert info.value.field == "transaction"


def stalled_process(url: str, claimed: Claimed, release: threading.Event) -> BaseException | bool:
    """Another process whose transactional handler stalls it altogether (event loop blocked,
    no heartbeats) until ``release``; returns what ``complete_in_transaction`` answered."""

    async def run() -> bool:
        store = PostgresStore(url, listen=False)
        await store.open(migrate=False)
        try:
            return await store.transactions.complete_in_transaction(
                claimed.timer.id,
                claimed.attempt,
                "stalled",
                datetime.now(UTC),
                lambda conn: release.wait(60),
            )
        finally:
            await store.close()

    try:
        return asyncio.run(run())
    except Exception as exc:
        return exc


async def test_a_stalled_transaction_is_ended_and_its_timer_rescued(
    pg_url: str, open_store: StoreFactory
) -> None:
    store = await open_store(pg_url)
    now = datetime.now(UTC)
    await store.put_timers([new_timer("k", now, namespace="shop")], "error", now)
    lease = timedelta(seconds=1)
    (claimed,) = await store.claim_due("shop", None, now, 10, "stalled", now + lease)
    release = threading.Event()
    answer = asyncio.get_running_loop().run_in_executor(
        None, stalled_process, pg_url, claimed, release
    )
    try:
        # Rescue skips the locked row; once the server has ended the stalled transaction (a
        # second or two after the lease ran out), rescue takes the attempt over.
        rescued: list[int] = []

        async def rescue() -> bool:
            rescued[:] = await store.rescue(datetime.now(UTC))
            return bool(rescued)

        await until(rescue, 60, "the stalled attempt to be rescued", every=0.1)
        assert rescued == [claimed.timer.id]
    finally:
        release.set()
    # The stalled process comes back to a connection the server closed: nothing committed.
    assert isinstance(await answer, StoreUnavailable)
    timer = await store.get_timer("shop", "k")
    assert timer is not None
    assert timer.status is Status.RETRYING
    assert [a.outcome for a in await store.list_attempts(claimed.timer.id)] == [Outcome.LOST]


async def test_a_hung_async_effect_is_cancelled_when_the_lease_runs_out(
    pg_url: str, open_store: StoreFactory
) -> None:
    store = await open_store(pg_url)
    now = datetime.now(UTC)
    await store.put_timers([new_timer("k", now, namespace="shop")], "error", now)
    (claimed,) = await store.claim_due("shop", None, now, 10, "n1", now + timedelta(seconds=1))
    cancelled = asyncio.Event()

    async def hang(conn: Any) -> None:
        await conn.execute("SELECT 1")
        try:
            await asyncio.Event().wait()
        finally:
            cancelled.set()

    assert isinstance(store, PostgresStore)
    with pytest.raises(TimeoutError, match="lease ran out"):
        await store.transactions.complete_in_transaction(
            claimed.timer.id, claimed.attempt, "n1", datetime.now(UTC), hang
        )
    assert cancelled.is_set()
    # Rolled back and unlocked: the attempt is still the node's, to record as failed.
    later = datetime.now(UTC)
    retry = Finish(claimed.timer.id, claimed.attempt, Outcome.RETRY, error="hung", run_at=later)
    assert await store.finish([retry], "n1", datetime.now(UTC)) == set()
    timer = await store.get_timer("shop", "k")
    assert timer is not None
    assert timer.status is Status.RETRYING
