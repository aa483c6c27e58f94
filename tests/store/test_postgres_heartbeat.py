"""A node's heartbeat on PostgreSQL is never queued behind the connection pool.

Transactional handlers hold a pooled connection for their whole transaction; with more of them
running than the pool has connections, the rest wait for one. A heartbeat that waited in that
queue too would let the leases of the waiting rows run out while their worker lives (they would
be rescued, recorded lost and run twice), so it has a connection of its own.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from storekit import PG_URL, StoreFactory, new_timer, with_params

from duetime.model import Node


async def test_a_heartbeat_renews_leases_while_every_pooled_connection_is_taken(
    pg_schema: str, open_store: StoreFactory
) -> None:
    # The pool gives up on a caller after a second: today's code then fails the heartbeat.
    url = with_params(PG_URL, schema=pg_schema, pool_max="2", pool_timeout="1")
    store = await open_store(url)
    now = datetime.now(UTC)  # real instants: the transactions read their lease off the server
    await store.register_node(Node("n1", "host", 1, now, now))
    await store.put_timers([new_timer(k, now) for k in "abc"], "error", now)
    claimed = await store.claim_due("ns", None, now, 10, "n1", now + timedelta(minutes=1))
    by_key = {c.timer.key: c for c in claimed}
    assert sorted(by_key) == ["a", "b", "c"]

    # a and b: transactional handlers, each holding one of the pool's two connections until
    # the heartbeat has answered; c waits for a connection, as its handler would.
    holding = 0
    taken = asyncio.Event()
    answered = asyncio.Event()

    async def effect(conn: Any) -> None:
        nonlocal holding
        holding += 1
        if holding == 2:
            taken.set()
        await answered.wait()

    handlers = [
        asyncio.create_task(
            store.transactions.complete_in_transaction(
                by_key[k].timer.id, by_key[k].attempt, "n1", now, effect
            )
        )
        for k in "ab"
    ]
    await taken.wait()
    until = now + timedelta(minutes=5)
    try:
        renewed = await store.heartbeat("n1", now, until, [c.timer.id for c in claimed])
    finally:
        answered.set()
        results = await asyncio.gather(*handlers)

    assert renewed == 1  # c; a and b are locked by their own transactions (rescue skips them)
    waiting = await store.get_timer("ns", "c")
    assert waiting is not None
    assert waiting.lease_expires_at == until
    assert results == [True, True]
