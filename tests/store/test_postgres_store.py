"""PostgreSQL-only behaviour: URL settings, routing, the server clock, migrations under a lock,
durable commits, and notifications that are sent only when the transaction commits."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from storekit import NOW, PG_URL, StoreFactory, blocked_by, drop_schema, new_timer, with_params
from tests.waiting import until

from duetime.errors import AlreadyExists, InvalidInput, StoreUnavailable
from duetime.model import FanOut, Finish, NewTimer, Outcome, Status
from duetime.model.history import EventFilter, RetentionPolicy
from duetime.store import create_store
from duetime.store.postgres.claimed_rows import claimed_timer_rows
from duetime.store.postgres.database import Statement
from duetime.store.postgres.schema import MIGRATIONS
from duetime.store.postgres.settings import parse_url
from duetime.store.postgres.store import PostgresStore
from duetime.store.queries import load_queries, query_files

Q = load_queries("duetime.store.postgres", *query_files("duetime.store.postgres"))

POLICY = RetentionPolicy(retention=timedelta(days=30), archive_after=timedelta(hours=1))


def test_url_settings() -> None:
    default = parse_url("postgresql://u:pw@db.example:6543/app?sslmode=require")
    assert default.schema == "duetime"
    assert default.channel == "duetime_duetime"
    params = psycopg.conninfo.conninfo_to_dict(default.conninfo)
    assert params["host"] == "db.example"
    assert params["port"] == "6543"
    assert params["dbname"] == "app"
    assert params["sslmode"] == "require"
    assert params["application_name"] == "duetime"
    assert "-c search_path=duetime" in str(params["options"])
    assert "-c synchronous_commit=on" in str(params["options"])

    custom = parse_url(
        "postgres://h/db?schema=tenant_a&pool_max=3&pool_timeout=1.5"
        "&application_name=mine&options=-c%20work_mem%3D8MB"
    )
    assert (custom.schema, custom.pool_max, custom.pool_timeout) == ("tenant_a", 3, 1.5)
    params = psycopg.conninfo.conninfo_to_dict(custom.conninfo)
    assert params["application_name"] == "mine"
    assert str(params["options"]).startswith("-c work_mem=8MB -c search_path=tenant_a")


async def test_public_conninfo_reaches_the_stores_tables(
    pg_url: str, open_store: StoreFactory
) -> None:
    """duetime.postgres.conninfo: an application's own connection lands on the store's schema
    with its session settings."""
    import duetime.postgres

    await open_store(pg_url)  # migrated
    with psycopg.connect(duetime.postgres.conninfo(pg_url), autocommit=True) as conn:
        row = conn.execute(
            "SELECT to_regclass('timers') IS NOT NULL, current_setting('TimeZone'), "
            "current_setting('synchronous_commit')"
        ).fetchone()
    assert row == (True, "UTC", "on")
    with pytest.raises(ValueError, match="not a PostgreSQL URL"):
        duetime.postgres.conninfo("sqlite:///x.db")


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://h/db?schema=Upper",
        "postgresql://h/db?schema=has-dash",
        "postgresql://h/db?schema=x;drop",
        "postgresql://h/db?schema=" + "a" * 56,
        "postgresql://h/db?pool_max=lots",
        "postgresql://h/db?pool_min=5&pool_max=2",
    ],
)
def test_bad_urls_are_invalid_input(url: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        create_store(url)
    assert raised.value.field == "database_url"


def test_create_store_routes_postgres_urls() -> None:
    assert isinstance(create_store("postgresql://h/db"), PostgresStore)
    assert isinstance(create_store("postgres://h/db?schema=x"), PostgresStore)


async def test_unreachable_server_is_store_unavailable() -> None:
    store = PostgresStore("postgresql://postgres@127.0.0.1:1/test?pool_timeout=1")
    with pytest.raises(StoreUnavailable):
        await store.open()
    with pytest.raises(StoreUnavailable):
        await store.get_timer("ns", "a")


async def test_db_now_is_the_server_clock(pg_url: str, open_store: StoreFactory) -> None:
    store = await open_store(pg_url)
    assert isinstance(store, PostgresStore)
    server = await store.db_now()
    assert server.utcoffset() == timedelta(0)
    assert abs(server - datetime.now(UTC)) < timedelta(days=3650)  # a real, aware instant
    assert await store.db_now() >= server


async def test_connections_commit_durably_in_the_schema_without_jit(
    pg_url: str, pg_schema: str
) -> None:
    store = PostgresStore(pg_url, listen=False)
    conn = await psycopg.AsyncConnection.connect(store.settings.conninfo)
    try:
        cur = await conn.execute(
            "SELECT current_setting('synchronous_commit'), current_setting('search_path'),"
            " current_setting('TimeZone'), current_setting('jit')"
        )
        assert await cur.fetchone() == ("on", pg_schema, "UTC", "off")
    finally:
        await conn.close()


async def test_concurrent_starters_migrate_once(pg_fresh_url: str) -> None:
    """On a schema no one made yet (not a pooled one: the race is over creating it)."""
    stores = [PostgresStore(pg_fresh_url, listen=False) for _ in range(6)]
    try:
        await asyncio.gather(*(s.open(migrate=False) for s in stores))
        assert await stores[0].schema_version() == 0
        applied = await asyncio.gather(*(s.migrate() for s in stores))
        latest = [version for version, _, _ in MIGRATIONS]
        assert sorted(applied, key=len) == [[]] * 5 + [latest]
        assert {await s.schema_version() for s in stores} == {latest[-1]}
    finally:
        await asyncio.gather(*(s.close() for s in stores))


async def test_schemas_isolate_stores(pg_url: str, open_store: StoreFactory) -> None:
    schema = "t_other_" + pg_url.rsplit("=", 1)[1][-8:]
    try:
        elsewhere = await open_store(with_params(PG_URL, schema=schema))
        await elsewhere.put_timers([new_timer("a")], "error", NOW)
        await elsewhere.close()
        store = await open_store(pg_url)
        assert await store.get_timer("ns", "a") is None
        assert await store.list_namespaces() == []
    finally:
        drop_schema(schema)


async def test_notifications_are_sent_only_on_commit(pg_url: str, open_store: StoreFactory) -> None:
    writer = await open_store(pg_url)
    reader = await open_store(pg_url)
    heard: list[datetime | None] = []
    reader.add_wakeup_listener(heard.append)
    await writer.put_timers([new_timer("a")], "error", NOW)
    later = NOW + timedelta(hours=1)
    with pytest.raises(AlreadyExists):
        await writer.put_timers([new_timer("b", later), new_timer("a")], "error", NOW)
    await writer.put_timers([new_timer("c", later + timedelta(hours=1))], "error", NOW)
    await until(lambda: later + timedelta(hours=1) in heard, 60, "the last batch's hint")
    assert later not in heard  # the rolled-back batch said nothing


REPORTING = (
    "pg_notify(%(channel)s, coalesce(pg_current_xact_id_if_assigned()::text, 'none')"
    " || ' ' || current_setting('synchronous_commit') || left(%(payload)s, 0))"
)
"""A NOTIFY's payload saying whether its transaction had written anything, and whether its
commit will be flushed."""


def reporting(query: str) -> str:
    assert "pg_notify(%(channel)s, %(payload)s)" in query
    return query.replace("pg_notify(%(channel)s, %(payload)s)", REPORTING)


async def test_the_stores_own_notifies_follow_the_commit_a_callers_are_part_of_it(
    pg_url: str, open_store: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL makes notifying transactions commit one after another; the store's own
    writes therefore notify after their commit, in a transaction of their own that wrote
    nothing and is not flushed. In a caller's transaction (the outbox), the notify is part of
    it, and the caller's commit stays durable."""
    store = await open_store(pg_url)
    assert isinstance(store, PostgresStore)
    reported = {
        **Q,
        "notify": reporting(Q["notify"]),
        "notify_after_commit": reporting(Q["notify_after_commit"]),
    }
    monkeypatch.setattr("duetime.store.postgres.notices.Q", reported)
    async with await psycopg.AsyncConnection.connect(PG_URL, autocommit=True) as listener:
        await listener.execute(f"LISTEN {store.settings.channel}")
        heard: list[str] = []

        async def hear(count: int) -> None:
            async with asyncio.timeout(5):
                async for notify in listener.notifies():
                    heard.append(notify.payload)
                    if len(heard) == count:
                        return

        await store.put_timers([new_timer("a", type="t")], "error", NOW)  # a write
        (claimed,) = await store.claim_due("ns", None, NOW, 10, "n1", NOW + timedelta(hours=1))
        retry = Finish(claimed.timer.id, 1, Outcome.RETRY, error="x", run_at=NOW)
        assert await store.finish([retry], "n1", NOW) == set()  # a pipelined write
        async with await psycopg.AsyncConnection.connect(PG_URL) as own, own.transaction():
            await store.outbox.put_timers_in(own, [new_timer("b", type="t")], "error", NOW)
        await hear(3)
    assert heard[:2] == ["none off", "none off"]  # wrote nothing, needs no flush
    xid, flushed = heard[2].split()
    assert (xid.isdigit(), flushed) == (True, "on")  # the caller's write, durable


async def test_a_failed_notify_after_the_commit_does_not_fail_the_write(
    pg_url: str, open_store: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await open_store(pg_url)
    failing = Q["notify_after_commit"] + " WHERE 1 / 0 = 0"
    monkeypatch.setattr("duetime.store.postgres.store.Q", {**Q, "notify_after_commit": failing})
    (result,) = await store.put_timers([new_timer("a", type="t")], "error", NOW)
    assert result.action == "created"
    (claimed,) = await store.claim_due("ns", None, NOW, 10, "n1", NOW + timedelta(hours=1))
    retry = Finish(claimed.timer.id, 1, Outcome.RETRY, error="x", run_at=NOW)
    assert await store.finish([retry], "n1", NOW) == set()
    monkeypatch.undo()
    stored = await store.get_timer("ns", "a")
    assert stored is not None
    assert (stored.status, stored.last_error) == (Status.RETRYING, "x")


async def test_payloads_round_trip_as_json(pg_url: str, open_store: StoreFactory) -> None:
    store = await open_store(pg_url)
    payload = {"text": "naïve ☃ 𝄞", "n": [0, -1, 2**53, 1.5], "deep": {"a": {"b": [None]}}}
    (result,) = await store.put_timers([new_timer("a", payload=payload)], "error", NOW)
    assert result.timer.payload == payload
    stored = await store.get_timer("ns", "a")
    assert stored is not None
    assert stored.payload == payload
    with pytest.raises(InvalidInput) as raised:
        await store.put_timers([new_timer("nul", payload={"x": "\u0000"})], "error", NOW)
    assert raised.value.field == "payload"
    with pytest.raises(InvalidInput) as raised:
        await store.put_timers([new_timer("nul\x00key")], "error", NOW)
    assert raised.value.field == "key"
    assert await store.get_timer("ns", "nul") is None


async def test_an_attempt_row_opened_by_an_earlier_version_is_closed_at_finish(
    pg_url: str, pg_schema: str, open_store: StoreFactory
) -> None:
    """Earlier versions inserted the attempt's row at the claim; the end of such an attempt
    overwrites that row instead of failing on the duplicate, and no open row is left."""
    store = await open_store(pg_url)
    await store.put_timers([new_timer("a", type="t")], "error", NOW)
    (claimed,) = await store.claim_due("ns", None, NOW, 10, "n1", NOW + timedelta(seconds=30))
    with psycopg.connect(PG_URL, autocommit=True, options=f"-c search_path={pg_schema}") as c:
        c.execute(
            "INSERT INTO attempts (timer_id, number, node_id, started_at) VALUES (%s, 1, 'n1', %s)",
            (claimed.timer.id, NOW),
        )
    (running,) = await store.list_attempts(claimed.timer.id)  # the row, not a second copy
    assert (running.number, running.finished_at) == (1, None)
    later = NOW + timedelta(seconds=2)
    assert await store.finish([Finish(claimed.timer.id, 1, Outcome.DONE)], "n1", later) == set()
    (ended,) = await store.list_attempts(claimed.timer.id)
    assert (ended.node_id, ended.claimed_at, ended.finished_at, ended.outcome) == (
        "n1",
        NOW,
        later,
        "done",
    )
    assert ended.started_at is None  # the outcome reported none


async def test_a_first_attempt_that_completes_its_timer_is_kept_on_the_timer_row(
    pg_url: str, pg_schema: str, open_store: StoreFactory
) -> None:
    """Nearly every timer is done at its first attempt: that attempt is read from the timer row
    (done_by, fired_at, completed_at) instead of written to attempts, and reads the same as a
    row would, in the listing, the event log's deliveries and the history. Any other attempt
    still gets its row."""
    store = await open_store(pg_url)
    assert isinstance(store, PostgresStore)
    await store.put_timers([new_timer("a", type="t"), new_timer("b", type="t")], "error", NOW)
    lease = NOW + timedelta(seconds=30)
    first = {c.timer.key: c for c in await store.claim_due("ns", None, NOW, 10, "n1", lease)}
    later = NOW + timedelta(seconds=2)
    retry_at = NOW + timedelta(seconds=5)
    began = NOW + timedelta(milliseconds=4)
    finishes = [
        Finish(first["a"].timer.id, 1, Outcome.DONE, started_at=began),
        Finish(
            first["b"].timer.id, 1, Outcome.RETRY, error="boom", run_at=retry_at, started_at=NOW
        ),
    ]
    assert await store.finish(finishes, "n1", later) == set()
    (again,) = await store.claim_due("ns", None, retry_at, 10, "n2", lease + timedelta(seconds=5))
    done_at = retry_at + timedelta(seconds=1)
    assert await store.finish([Finish(again.timer.id, 2, Outcome.DONE)], "n2", done_at) == set()

    a, b = first["a"].timer.id, first["b"].timer.id
    with psycopg.connect(PG_URL, autocommit=True, options=f"-c search_path={pg_schema}") as c:
        rows = c.execute("SELECT timer_id, number FROM attempts ORDER BY 1, 2").fetchall()
        kept = c.execute("SELECT key, done_by FROM timers ORDER BY key").fetchall()
        viewed = c.execute("SELECT timer_id, number, node_id FROM all_attempts ORDER BY 1, 2")
        assert viewed.fetchall() == [(a, 1, "n1"), (b, 1, "n1"), (b, 2, "n2")]
    assert rows == [(b, 1), (b, 2)]  # none for a's one attempt
    assert kept == [("a", "n1"), ("b", None)]
    (only,) = await store.list_attempts(a)
    assert (only.timer_id, only.number, only.node_id) == (a, 1, "n1")
    assert (only.claimed_at, only.started_at, only.finished_at, only.outcome, only.error) == (
        NOW,
        began,
        later,
        Outcome.DONE,
        None,
    )
    assert [(x.number, x.node_id, x.outcome) for x in await store.list_attempts(b)] == [
        (1, "n1", Outcome.RETRY),
        (2, "n2", Outcome.DONE),
    ]
    logged = {
        e.timer.key: e.deliveries
        for e in (await store.history.list_events("ns", EventFilter(), None, 10)).items
    }
    assert logged["a"] == (only,)
    assert [(x.number, x.node_id) for x in logged["b"]] == [(1, "n1"), (2, "n2")]

    await store.history.maintain(POLICY, done_at + timedelta(hours=2))  # both archived
    with psycopg.connect(PG_URL, autocommit=True, options=f"-c search_path={pg_schema}") as c:
        assert c.execute("SELECT count(*) FROM timers").fetchone() == (0,)
        archived = c.execute(
            "SELECT timer_id, number, node_id FROM attempt_history ORDER BY 1, 2"
        ).fetchall()
    assert archived == [(a, 1, "n1"), (b, 1, "n1"), (b, 2, "n2")]
    assert await store.list_attempts(a) == [only]


async def test_a_pipelined_claim_is_one_transaction(
    pg_url: str, open_store: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claim's statements share one implicit transaction: when the claim fails, the
    setting sent before it in the same round trip is gone with it and nothing was claimed."""
    store = await open_store(pg_url)
    assert isinstance(store, PostgresStore)
    await store.put_timers([new_timer("a", type="t")], "error", NOW)
    lease = NOW + timedelta(seconds=30)
    broken = dict(Q)
    # fails after the UPDATE ran: every claimed row has attempts = 1
    broken["claim_due"] = Q["claim_due"] + " WHERE 1 / (attempts - 1) = 0"
    monkeypatch.setattr("duetime.store.postgres.working.Q", broken)
    with pytest.raises(psycopg.errors.DivisionByZero):
        await store.claim_due("ns", None, NOW, 10, "n1", lease)
    monkeypatch.undo()
    (setting,) = await store._db.atomic(
        [Statement("SELECT current_setting('enable_sort') AS s", {})]
    )
    assert setting == [{"s": "on"}]
    (claimed,) = await store.claim_due("ns", None, NOW, 10, "n1", lease)
    assert claimed.attempt == 1


async def test_only_a_claim_commits_without_waiting_for_its_flush(
    pg_url: str, open_store: StoreFactory
) -> None:
    """A claim may be lost in a server crash (its timers then run again), so its transaction
    does not wait for the WAL flush; the setting is local to it: the outcome written next on the
    same connection, and everything else, commits durably."""
    store = await open_store(with_params(pg_url, pool_max="1"))
    assert isinstance(store, PostgresStore)
    await store.put_timers([new_timer("a", type="t")], "error", NOW)
    show = Statement("SELECT current_setting('synchronous_commit') AS s", {})
    (_, during) = await store._db.atomic(
        [Statement(Q["claim_in_order"], {"claim_commit": "off"}), show]
    )
    assert during == [{"s": "off"}]
    (claimed,) = await store.claim_due("ns", None, NOW, 10, "n1", NOW + timedelta(seconds=30))
    (after,) = await store._db.atomic([show])
    assert after == [{"s": "on"}]
    assert not await store.finish([Finish(claimed.timer.id, 1, Outcome.DONE)], "n1", NOW)
    (after,) = await store._db.atomic([show])
    assert after == [{"s": "on"}]


async def test_durable_claims_commit_like_every_other_write(
    pg_url: str, open_store: StoreFactory
) -> None:
    """``durable_claims=true`` (a cluster that fails over): the claim waits for its flush and
    a synchronous standby like the rest, so a promoted standby never forgets a started attempt."""
    store = await open_store(with_params(pg_url, pool_max="1", durable_claims="true"))
    assert isinstance(store, PostgresStore)
    assert store.settings.durable_claims
    show = Statement("SELECT current_setting('synchronous_commit') AS s", {})
    claim_in_order = Statement(Q["claim_in_order"], store.settings.claim_params)
    (_, during) = await store._db.atomic([claim_in_order, show])
    assert during == [{"s": "on"}]
    await store.put_timers([new_timer("a", type="t")], "error", NOW)
    (claimed,) = await store.claim_due("ns", None, NOW, 10, "n1", NOW + timedelta(seconds=30))
    assert claimed.attempt == 1


async def test_claimed_timer_rows_name_the_columns_a_statement_lacks(
    pg_url: str, open_store: StoreFactory
) -> None:
    """The claim's rows leave out what the caller knows; those values fill the timer in, and a
    column that is neither returned nor known is named."""
    store = await open_store(pg_url)
    assert isinstance(store, PostgresStore)
    await store.put_timers([new_timer("a", type="t")], "error", NOW)
    lease = NOW + timedelta(seconds=30)
    known = {"lease_owner": "n1", "lease_expires_at": lease, "status": Status.RUNNING}
    everything = Statement("SELECT * FROM timers", {}, claimed_timer_rows({}))
    partial = Statement(
        "SELECT * FROM timers", {}, claimed_timer_rows(known), binary=True
    )  # known values win over the columns
    (stored,), (filled,) = await store._db.atomic([everything, partial])
    assert (stored.key, stored.status, stored.lease_owner) == ("a", Status.SCHEDULED, None)
    assert (filled.key, filled.status, filled.lease_owner) == ("a", Status.RUNNING, "n1")
    assert (filled.lease_expires_at, filled.payload) == (lease, stored.payload)
    lacking = "SELECT id, namespace, key FROM timers"
    with pytest.raises(KeyError, match="type, payload"):
        await store._db.atomic([Statement(lacking, {}, claimed_timer_rows(known))])


@pytest.mark.parametrize("operation", ["finish", "fan_out"])
async def test_an_outcome_waits_for_a_concurrent_heartbeat_and_applies(
    pg_url: str, pg_schema: str, open_store: StoreFactory, operation: str
) -> None:
    """A heartbeat renewing the lease while an outcome is being written commits a new version
    of the row after the outcome's statement began; the outcome waits for it and applies to
    that version (READ COMMITTED's re-check), rather than missing the row and calling it lost."""
    store = await open_store(pg_url)
    assert isinstance(store, PostgresStore)
    await store.put_timers([new_timer("a", type="t")], "error", NOW)
    lease = NOW + timedelta(seconds=30)
    (claimed,) = await store.claim_due("ns", None, NOW, 10, "n1", lease)
    tid = claimed.timer.id
    renewing = await psycopg.AsyncConnection.connect(PG_URL, options=f"-c search_path={pg_schema}")
    try:
        await renewing.execute(  # extend_leases, left uncommitted for now
            "UPDATE timers SET lease_expires_at = %s WHERE id = %s", (lease, tid)
        )
        later = NOW + timedelta(seconds=1)
        if operation == "finish":
            outcome = asyncio.ensure_future(
                store.finish([Finish(tid, 1, Outcome.DONE)], "n1", later)
            )
        else:
            fan = FanOut(tid, 1, "a", ("x", "y"))
            outcome = asyncio.ensure_future(store.fan_out([fan], "n1", later))
        await blocked_by(renewing)
        assert not outcome.done()  # waiting for the heartbeat's row lock
        await renewing.commit()
        assert await asyncio.wait_for(outcome, 10) == set()
    finally:
        await renewing.close()
    timer = await store.get_timer("ns", "a")
    assert timer is not None
    assert timer.status.value == "done"
    (attempt,) = await store.list_attempts(tid)
    assert attempt.finished_at == later


async def test_a_batch_rolled_back_by_a_deadlock_is_sent_again(
    pg_url: str, pg_schema: str, open_store: StoreFactory
) -> None:
    """A lazily validated batch that loses a deadlock is retried with the same timers: the
    retry replays what the stream already gave (a generator cannot be read twice)."""
    store = await open_store(pg_url)
    await store.put_timers([new_timer("a"), new_timer("b")], "error", NOW)
    reads: list[str] = []

    def batch() -> Iterator[NewTimer]:
        for key in ("a", "b"):
            reads.append(key)
            yield new_timer(key, payload={"from": "batch"})

    other = await psycopg.AsyncConnection.connect(
        PG_URL, options=f"-c search_path={pg_schema} -c deadlock_timeout=20s"
    )
    try:  # holds b, then asks for a: the batch (which holds a, waits for b) is the victim
        await other.execute("UPDATE timers SET version = version + 1 WHERE key = 'b'")
        writing = asyncio.ensure_future(store.put_timers(batch(), "update", NOW))
        await blocked_by(other)
        assert not writing.done()
        await other.execute("UPDATE timers SET version = version + 1 WHERE key = 'a'")
        await other.commit()  # reached once PostgreSQL broke the deadlock (1 s) for the batch
        results = await asyncio.wait_for(writing, 10)
    finally:
        await other.close()
    assert reads == ["a", "b"]
    assert [(r.action, r.timer.key, r.timer.payload) for r in results] == [
        ("updated", "a", {"from": "batch"}),
        ("updated", "b", {"from": "batch"}),
    ]
    for result in results:
        assert await store.get_timer("ns", result.timer.key) == result.timer


async def test_a_batch_cancelled_midway_stores_nothing_and_frees_its_connection(
    pg_url: str, pg_schema: str, open_store: StoreFactory
) -> None:
    """A caller that gives up on ``put_timers`` while its pipeline is half sent (here: waiting
    for a row another transaction holds) rolls all of it back, and the pool's only connection
    serves the next call."""
    store = await open_store(with_params(pg_url, pool_max="1"))
    await store.put_timers([new_timer("k150")], "error", NOW)
    other = await psycopg.AsyncConnection.connect(PG_URL, options=f"-c search_path={pg_schema}")
    try:
        await other.execute("UPDATE timers SET version = version WHERE key = 'k150'")
        batch = (new_timer(f"k{n}", payload={"n": n}) for n in range(300))
        writing = asyncio.ensure_future(store.put_timers(batch, "update", NOW))
        await blocked_by(other)
        assert not writing.done()  # chunks before k150 written, waiting for its row
        writing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await writing
    finally:
        await other.rollback()
        await other.close()
    assert sum((await store.count_by_status("ns")).values()) == 1
    timer = await store.get_timer("ns", "k150")
    assert timer is not None
    assert timer.payload == {"key": "k150"}
    (after,) = await asyncio.wait_for(store.put_timers([new_timer("after")], "error", NOW), 10)
    assert after.action == "created"


async def test_the_timers_table_is_vacuumed_like_a_queue(
    pg_url: str, pg_schema: str, open_store: StoreFactory
) -> None:
    """Dead row versions from claims and outcomes are vacuumed after 1 % of the table, not
    PostgreSQL's default 20 % (the claim walks the pending index over them until then)."""
    await open_store(pg_url)
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        row = conn.execute(
            "SELECT c.reloptions FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname = 'timers'",
            (pg_schema,),
        ).fetchone()
    assert row is not None
    options = dict(option.split("=") for option in row[0])
    assert options["autovacuum_vacuum_scale_factor"] == "0.01"
    assert options["autovacuum_vacuum_threshold"] == "1000"
    assert options["autovacuum_analyze_scale_factor"] == "0.02"


async def test_a_pipelined_write_commits_all_or_nothing(
    pg_url: str, open_store: StoreFactory
) -> None:
    """BEGIN and COMMIT go out with the work's statements; a failure in the work (the
    client's or the server's) rolls everything back and leaves the one pooled connection as
    it was, outside any transaction, with its local settings gone."""
    store = await open_store(with_params(pg_url, pool_max="1"))
    assert isinstance(store, PostgresStore)
    await store.put_timers([new_timer("a", type="t")], "error", NOW)
    rename = "UPDATE timers SET type = %(type)s WHERE key = 'a'"
    show = Statement("SELECT type, current_setting('synchronous_commit') AS s FROM timers", {})

    async def renamed(conn: psycopg.AsyncConnection[Any], type: str, fail: str | None) -> None:
        await conn.execute(
            Q["claim_in_order"], {"claim_commit": "off"}
        )  # SET LOCAL synchronous_commit off
        await conn.execute(rename, {"type": type})
        if fail == "client":
            raise RuntimeError("the work failed")
        if fail == "server":
            await (await conn.execute("SELECT 1 / 0")).fetchall()

    for fail in ("client", "server"):
        with pytest.raises((RuntimeError, psycopg.errors.DivisionByZero)):
            await store._db.pipelined_write(lambda conn, f=fail: renamed(conn, "lost", f))
        (rows,) = await store._db.atomic([show])
        assert rows == [{"type": "t", "s": "on"}]
    await store._db.pipelined_write(lambda conn: renamed(conn, "kept", None))
    (rows,) = await store._db.atomic([show])
    assert rows == [{"type": "kept", "s": "on"}]
