"""PostgreSQL keeps a schedule's position apart from its definition (migration 0021): a store
made before it keeps every schedule as it was, and materialises on from where it had got to."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
from storekit import PG_URL, StoreFactory
from test_schedules_materializer import all_timers

from duetime import AsyncApp, FrozenClock
from duetime.schedules import occurrence_key
from duetime.store.postgres.schema import MIGRATIONS, Q

NOW = datetime(2025, 3, 8, 12, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


async def test_schedules_stored_before_the_split_keep_their_place(
    open_store: StoreFactory, pg_url: str, pg_schema: str
) -> None:
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{pg_schema}"')
        conn.execute(f'SET search_path = "{pg_schema}"')
        conn.execute(Q["create_migrations_table"])
        for version, name, text in MIGRATIONS:
            if version >= 21:
                break
            conn.execute(text)
            conn.execute(Q["record_migration"], {"version": version, "name": name})
        conn.execute("INSERT INTO namespaces (name, created_at) VALUES ('ns', %s)", (NOW,))
        conn.execute(
            """
            INSERT INTO schedules (namespace, name, type, payload, subject, cron, timezone,
                max_attempts, next_at, after_at, anchor_at, last_at, created_at, updated_at,
                version, active, overlap)
            VALUES
                ('ns', 'hourly', 'ping', '{"n": 1}', 'user-1', '0 * * * *', 'Europe/London', 5,
                 %(next)s, %(now)s, %(now)s, %(now)s, %(now)s, %(now)s, 7, true, 'skip'),
                ('ns', 'paused', 'ping', '{}', NULL, '30 * * * *', 'UTC', 3,
                 %(later)s, %(now)s, %(now)s, NULL, %(now)s, %(now)s, 2, false, 'allow')
            """,
            {"now": NOW, "next": NOW + HOUR, "later": NOW + HOUR / 2},
        )
    store = await open_store(pg_url)
    clock = FrozenClock(NOW)
    app = AsyncApp(pg_url, "ns", clock=clock, store=store)
    hourly = await app.get_schedule("hourly")
    assert (hourly.next_at, hourly.after_at, hourly.last_at) == (NOW + HOUR, NOW, NOW)
    assert (hourly.version, hourly.active, hourly.overlap) == (7, True, "skip")
    assert (hourly.payload, hourly.subject) == ({"n": 1}, "user-1")
    assert hourly.timezone == "Europe/London"
    paused = await app.get_schedule("paused")
    assert (paused.active, paused.version, paused.next_at) == (False, 2, NOW + HOUR / 2)

    clock.set(NOW + HOUR)
    assert await app.materializer(check_tzdata=False).tick(clock.now()) == 1
    (timer,) = await all_timers(app)
    assert timer.key == occurrence_key("hourly", NOW + HOUR)
    assert (timer.payload, timer.subject, timer.max_attempts) == ({"n": 1}, "user-1", 5)
    moved = await app.get_schedule("hourly")
    assert (moved.next_at, moved.last_at, moved.version) == (NOW + 2 * HOUR, NOW + HOUR, 8)
    resumed = await app.update_schedule("paused", active=True)
    assert (resumed.active, resumed.version) == (True, 3)
    await app.delete_schedule("paused")
    assert [s.name for s in (await app.list_schedules()).items] == ["hourly"]
