"""What a worker's leases depend on, on PostgreSQL, is never queued behind the connection pool.

Transactional handlers hold a pooled connection for their whole transaction; with more of them
running than the pool has connections, the rest wait for one. A heartbeat that waited in that
queue too would let the leases of the waiting rows run out while their worker lives (they would
be rescued, recorded lost and run twice), so it has a connection of its own, and the routing
read that follows it does not hold the next one back. A claim that waited there would spend
its lease before its rows were known to be held, so claims have connections of their own too.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from storekit import PG_URL, StoreFactory, new_timer, wait_until, with_params

from duetime.clock import SystemClock
from duetime.config import Settings
from duetime.dispatch import Dispatch
from duetime.handlers import HandlerRegistry
from duetime.model import Claimed, Node, Subscription
from duetime.services.nodes import NodeUpkeep
from duetime.store import Store


async def busy_store(pg_schema: str, open_store: StoreFactory) -> tuple[Store, list[Claimed]]:
    """A store of two pooled connections that gives up on a caller after a second (today's code
    then fails), node n1 registered, holding timers a, b and c."""
    url = with_params(PG_URL, schema=pg_schema, pool_max="2", pool_timeout="1")
    store = await open_store(url)
    now = datetime.now(UTC)  # real instants: the transactions read their lease off the server
    await store.register_node(Node("n1", "host", 1, now, now))
    await store.put_timers([new_timer(k, now) for k in "abc"], "error", now)
    claimed = await store.claim_due("ns", None, now, 10, "n1", now + timedelta(minutes=1))
    assert sorted(c.timer.key for c in claimed) == ["a", "b", "c"]
    return store, claimed


@asynccontextmanager
async def pool_taken(store: Store, claimed: list[Claimed]) -> AsyncIterator[list[bool]]:
    """a and b: transactional handlers, each holding one of the pool's two connections until
    the block ends; c waits for a connection, as its handler would. Yields the handlers'
    answers (filled in once they commit)."""
    by_key = {c.timer.key: c for c in claimed}
    holding = 0
    taken = asyncio.Event()
    answered = asyncio.Event()

    async def effect(conn: Any) -> None:
        nonlocal holding
        holding += 1
        if holding == 2:
            taken.set()
        await answered.wait()

    now = datetime.now(UTC)
    handlers = [
        asyncio.create_task(
            store.transactions.complete_in_transaction(
                by_key[k].timer.id, by_key[k].attempt, "n1", now, effect
            )
        )
        for k in "ab"
    ]
    await taken.wait()
    results: list[bool] = []
    try:
        yield results
    finally:
        answered.set()
        results.extend(await asyncio.gather(*handlers))


async def test_a_heartbeat_renews_leases_while_every_pooled_connection_is_taken(
    pg_schema: str, open_store: StoreFactory
) -> None:
    store, claimed = await busy_store(pg_schema, open_store)
    until = datetime.now(UTC) + timedelta(minutes=5)
    async with pool_taken(store, claimed) as results:
        now = datetime.now(UTC)
        held = [(c.timer.id, c.timer.claim_token) for c in claimed]
        renewed = await store.heartbeat("n1", now, until, held)

    assert renewed == 1  # c; a and b are locked by their own transactions (rescue skips them)
    waiting = await store.get_timer("ns", "c")
    assert waiting is not None
    assert waiting.lease_expires_at == until
    assert results == [True, True]


async def test_the_routing_read_does_not_hold_the_next_heartbeat_back(
    pg_schema: str, open_store: StoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """A heartbeat round ends once the leases are renewed; the live nodes' subscriptions are
    read beside it, when a pooled connection frees up."""
    caplog.set_level(logging.ERROR, "duetime.services")
    store, claimed = await busy_store(pg_schema, open_store)
    now = datetime.now(UTC)
    other = Subscription("ns", "job.elsewhere", ("handler",))
    await store.register_node(Node("n2", "host", 2, now, now, subscriptions=(other,)))
    dispatch = Dispatch("ns", "n1", HandlerRegistry())
    upkeep = NodeUpkeep(store, SystemClock(), Settings(), "n1", "worker", dispatch=dispatch)
    try:
        async with pool_taken(store, claimed):
            await upkeep.step()
            await upkeep.step()  # the routing read of the first is still waiting: no second
        await wait_until(lambda: "job.elsewhere" in dispatch.everyone().types)
    finally:
        await upkeep.close()
    assert "subscriptions failed" not in caplog.text


async def test_a_claim_is_made_while_every_pooled_connection_is_taken(
    pg_schema: str, open_store: StoreFactory
) -> None:
    store, claimed = await busy_store(pg_schema, open_store)
    now = datetime.now(UTC)
    await store.put_timers([new_timer("d", now)], "error", now)
    lease_until = now + timedelta(minutes=1)
    async with pool_taken(store, claimed):
        (more,) = await store.claim_due("ns", None, now, 10, "n1", lease_until)
    assert more.timer.key == "d"
    row = await store.get_timer("ns", "d")
    assert row is not None
    assert (row.lease_owner, row.lease_expires_at) == ("n1", lease_until)
