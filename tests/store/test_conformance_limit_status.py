"""Store conformance, flow control at scale: the status of many rules in a fixed number of
statements, pages of rules, and the cap on the rules one namespace may hold.

A tenant's listing of its rules must cost what one rule's does, whatever it has created: a
query per rule against every glob made 10,000 rules a 40-second read that held the database
for every other tenant.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from storekit import NOW, new_timer

from duetime.errors import CapReached, InvalidInput
from duetime.model import FanOut, Finish, Outcome
from duetime.model.flow_rules import FlowRule, destination_rule, plan_of
from duetime.store import Store
from duetime.store.postgres.store import PostgresStore
from duetime.store.sqlite.store import SqliteStore
from duetime.timemath.ratelimit import Rate

LEASE = NOW + timedelta(seconds=30)
MANY = 2_000


@asynccontextmanager
async def statements(store: Store, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[list[str]]:
    """Every statement the store sends to its database inside the block."""
    seen: list[str] = []
    if isinstance(store, SqliteStore):

        def trace(conn: sqlite3.Connection) -> None:
            conn.set_trace_callback(seen.append)

        await store._db.read(trace)
        try:
            yield seen
        finally:
            await store._db.read(lambda conn: conn.set_trace_callback(None))
        return
    assert isinstance(store, PostgresStore)
    execute: Callable[..., Any] = psycopg.AsyncCursor.execute

    async def counted(self: psycopg.AsyncCursor[Any], query: Any, *args: Any, **kw: Any) -> Any:
        seen.append(str(query))
        return await execute(self, query, *args, **kw)

    monkeypatch.setattr(psycopg.AsyncCursor, "execute", counted)
    try:
        yield seen
    finally:
        monkeypatch.undo()


async def put_rules(store: Store, rules: list[FlowRule]) -> None:
    """Put ``rules`` a few at a time: no more writes in flight than the PostgreSQL pool has
    connections, so none waits in the pool's queue behind a hundred others (on a busy machine
    that wait outran the pool's timeout, which is the store's answer to an overload, not what
    this file tests)."""
    width = asyncio.Semaphore(4)

    async def put(rule: FlowRule) -> None:
        async with width:
            await store.limits.put_limit(rule, NOW)

    await asyncio.gather(*(put(r) for r in rules))


async def test_the_status_of_2000_rules_takes_two_statements(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    rules = [FlowRule("ns", f"t{i:04}.*", concurrency=5) for i in range(MANY)]
    await put_rules(store, rules)
    await store.put_timers(
        [new_timer(f"k{i}", NOW - timedelta(seconds=i), type=f"t{i:04}.x") for i in range(50)],
        "error",
        NOW - timedelta(minutes=1),
    )
    async with statements(store, monkeypatch) as seen:
        found = await store.limits.status("ns", NOW)
    assert len(seen) <= 2, seen[:5]
    assert len(found.items) == MANY
    assert found.next_cursor is None
    by_pattern = {s.rule.pattern: s for s in found.items}
    assert by_pattern["t0007.*"].held == 1
    assert by_pattern["t0007.*"].oldest_held_at == NOW - timedelta(seconds=7)
    assert by_pattern["t1999.*"].held == 0
    async with statements(store, monkeypatch) as seen:
        first = await store.limits.status("ns", NOW, None, 100)
    assert len(seen) <= 2
    assert [s.rule.pattern for s in first.items] == [f"t{i:04}.*" for i in range(100)]


async def delivery_to(store: Store, destination: str, type: str, due: timedelta) -> None:
    """A due delivery row of an event of ``type`` to ``destination``."""
    await store.put_timers([new_timer("evt", NOW - due, type=type)], "error", NOW)
    (event,) = await store.claim_due("ns", None, NOW, 10, "n1", LEASE)
    fan = FanOut(event.timer.id, event.attempt, "evt", (destination,))
    assert await store.fan_out([fan], "n1", NOW) == set()


async def test_each_rule_counts_what_it_governs_in_one_pass(store: Store) -> None:
    limits = store.limits
    await delivery_to(store, "hook", "email.welcome", timedelta(seconds=3))
    await limits.put_limit(FlowRule("ns", "email.*", concurrency=1), NOW)
    await limits.put_limit(FlowRule("ns", "email.welcome", concurrency=3), NOW)
    await limits.set_paused("ns", "email.we*", True, NOW)  # a pause only: counts all it matches
    hook = destination_rule("ns", "hook", Rate(1, timedelta(hours=1)), None)
    await limits.put_limit(hook, NOW)
    await store.put_timers(
        [
            new_timer("w1", NOW - timedelta(seconds=5), type="email.welcome"),
            new_timer("w2", NOW - timedelta(seconds=4), type="email.welcome"),
            new_timer("d1", NOW - timedelta(seconds=9), type="email.digest"),
            new_timer("late", NOW + timedelta(hours=1), type="email.digest"),  # not due
            new_timer("other", NOW - timedelta(seconds=1), type="sms"),
        ],
        "error",
        NOW - timedelta(minutes=1),
    )
    plan = plan_of(await limits.list_rules("ns"))
    got = await limits.claim("ns", None, NOW, 1, "n1", LEASE, plan)
    (running,) = got.claimed
    assert running.timer.key == "d1"  # the oldest due, under email.*
    found = {s.rule.pattern: s for s in (await limits.status("ns", NOW)).items}
    counts = {p: (s.running, s.held, s.oldest_held_at) for p, s in found.items()}
    assert counts == {
        "@hook": (0, 1, NOW - timedelta(seconds=3)),
        "email.*": (1, 0, None),
        "email.we*": (0, 2, NOW - timedelta(seconds=5)),
        "email.welcome": (0, 2, NOW - timedelta(seconds=5)),
    }
    await store.finish([Finish(running.timer.id, running.attempt, Outcome.DONE)], "n1", NOW)
    found = {s.rule.pattern: s for s in (await limits.status("ns", NOW)).items}
    assert found["email.*"].running == 0


async def test_rules_are_listed_in_pages_by_pattern(store: Store) -> None:
    await put_rules(store, [FlowRule("ns", f"p{i}", concurrency=1) for i in range(5)])
    first = await store.limits.status("ns", NOW, None, 2)
    assert [s.rule.pattern for s in first.items] == ["p0", "p1"]
    assert first.next_cursor is not None
    second = await store.limits.status("ns", NOW, first.next_cursor, 2)
    assert [s.rule.pattern for s in second.items] == ["p2", "p3"]
    third = await store.limits.status("ns", NOW, second.next_cursor, 2)
    assert [s.rule.pattern for s in third.items] == ["p4"]
    assert third.next_cursor is None
    with pytest.raises(InvalidInput) as refused:
        await store.limits.status("ns", NOW, "bm90LWEtY3Vyc29y", 2)
    assert refused.value.field == "cursor"


async def test_a_namespace_holds_at_most_its_cap_of_rules(store: Store) -> None:
    limits = store.limits
    for pattern in ("a", "b.*"):
        await limits.put_limit(FlowRule("ns", pattern, concurrency=1), NOW, 3)
    await limits.set_paused("ns", "c", True, NOW, 3)
    with pytest.raises(CapReached) as refused:
        await limits.put_limit(FlowRule("ns", "d", concurrency=1), NOW, 3)
    assert refused.value.field == "pattern"
    assert refused.value.cap == 3
    assert "max_limits" in refused.value.message
    with pytest.raises(CapReached):
        await limits.set_paused("ns", "d", True, NOW, 3)
    assert [r.pattern for r in await limits.list_rules("ns")] == ["a", "b.*", "c"]
    # Changing a rule that exists is no new one; a destination's rate is configuration.
    changed = await limits.put_limit(FlowRule("ns", "a", concurrency=9), NOW, 3)
    assert changed.concurrency == 9
    assert await limits.set_paused("ns", "a", True, NOW, 3) is not None
    hook = destination_rule("ns", "hook", Rate(1, timedelta(hours=1)), None)
    await limits.put_limit(hook, NOW, 3)
    await limits.put_limit(FlowRule("other", "d", concurrency=1), NOW, 3)  # its own cap
    assert await limits.set_paused("ns", "c", False, NOW, 3) is None  # room again
    await limits.put_limit(FlowRule("ns", "d", concurrency=1), NOW, 3)
