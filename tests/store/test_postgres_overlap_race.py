"""PostgreSQL: the end of an occurrence and the decision to buffer the next one cannot miss
each other.

The materialiser decides to buffer while it holds the schedule row's lock (it read the earlier
occurrence as unfinished); an end committed meanwhile must still release what it buffers. The
release trigger takes that lock first, so it waits, then sees the buffered occurrence. Here a
second connection plays the materialiser: it holds the lock, the finish waits on it (seen in
pg_locks, not slept for), the buffered occurrence appears, the lock goes — and the finish
releases it.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import psycopg
from storekit import PG_URL, StoreFactory
from tests.waiting import until

from duetime import AsyncApp, FrozenClock
from duetime.model import Finish, Outcome
from duetime.model.schedules import PARKED
from duetime.schedules import occurrence_key

START = datetime(2025, 3, 8, 12, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


async def test_an_end_waits_for_the_buffering_decision_and_releases_it(
    pg_url: str, pg_schema: str, open_store: StoreFactory
) -> None:
    store = await open_store(pg_url)
    clock = FrozenClock(START)
    app = AsyncApp(store.url, "ns", clock=clock, store=store)
    await app.schedules.add("s", "t", cron="* * * * *", overlap="buffer_one")
    clock.set(START + MINUTE)
    await app.schedules.materializer(check_tzdata=False).tick(clock.now())
    (first,) = await store.claim_due("ns", None, clock.now(), 10, "n1", clock.now() + MINUTE)
    clock.set(START + 2 * MINUTE)
    await app.schedules.materializer(check_tzdata=False).tick(clock.now())
    second = occurrence_key("s", START + 2 * MINUTE)
    options = f"-c search_path={pg_schema}"
    async with await psycopg.AsyncConnection.connect(PG_URL, options=options) as other:
        # The second occurrence as the materialiser is about to buffer it: not parked yet.
        await other.execute("UPDATE timers SET run_at = due_at WHERE key = %s", (second,))
        await other.commit()
        await other.execute("SELECT 1 FROM schedules WHERE name = 's' FOR UPDATE")
        cursor = await other.execute("SELECT pg_current_xact_id()::text::bigint")
        row = await cursor.fetchone()
        assert row is not None
        holder = row[0]
        done = Finish(first.timer.id, first.attempt, Outcome.DONE)
        ending = asyncio.create_task(store.finish([done], "n1", clock.now()))
        async with await psycopg.AsyncConnection.connect(PG_URL, autocommit=True) as watcher:

            async def finish_waits() -> bool:
                waiting = await watcher.execute(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'transactionid'"
                    " AND NOT granted AND transactionid::text::bigint = %s",
                    (holder,),
                )
                count = await waiting.fetchone()
                if count is not None and count[0] > 0:
                    return True
                assert not ending.done(), "the finish did not wait for the lock"
                return False

            # until the finish's trigger waits for the schedule row's lock
            await until(finish_waits, 60, "the finish to wait for the lock", every=0.01)
        await other.execute("UPDATE timers SET run_at = %s WHERE key = %s", (PARKED, second))
        await other.commit()
    assert await ending == set()
    released = await store.get_timer("ns", second)
    assert released is not None
    assert released.run_at == clock.now()
