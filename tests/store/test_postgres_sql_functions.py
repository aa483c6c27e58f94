"""Scheduling from SQL (migration 0029): schedule, emit, cancel and schedule_many called as plain
SQL, no duetime Python in the caller, in the caller's transaction; the rows they write are read,
claimed and resolved by duetime like any other."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from storekit import NOW, PG_URL, StoreFactory, new_timer

from duetime.model import HELD_AT, Status
from duetime.services.held import release_held
from duetime.store.postgres.store import PostgresStore
from duetime.timemath.tzmath import load_zone, to_utc


def _connect(schema: str, *, autocommit: bool = False, **kwargs: Any) -> psycopg.Connection[Any]:
    return psycopg.connect(
        PG_URL, autocommit=autocommit, options=f"-c search_path={schema}", **kwargs
    )


async def _open(open_store: StoreFactory, url: str, *namespaces: str) -> PostgresStore:
    store = await open_store(url)
    assert isinstance(store, PostgresStore)
    for namespace in namespaces or ("ns",):
        await store.ensure_namespace(namespace, NOW)
    return store


def _one(schema: str, query: str, *params: Any) -> tuple[Any, ...]:
    with _connect(schema) as conn:
        row = conn.execute(query, params).fetchone()
        conn.commit()
    assert row is not None
    return tuple(row)


async def test_schedule_writes_a_timer_the_store_reads_and_claims(
    pg_url: str, pg_schema: str, open_store: StoreFactory
) -> None:
    """An instant, a delay and the options: the row is the Python path's (same key table,
    producer named after the role), and a worker claims it."""
    store = await _open(open_store, pg_url)
    timer_id, key, action, due_at = _one(
        pg_schema,
        "SELECT * FROM schedule('ns', 'invoice.due', '{\"n\": 1}', at => '2025-03-01T11:00Z',"
        " key => 'inv-1', subject => 'user-7', correlation_id => 'c-1', max_attempts => 4,"
        " expires_after => interval '1 hour', priority => 3)",
    )
    assert (key, action, due_at) == ("inv-1", "created", datetime(2025, 3, 1, 11, tzinfo=UTC))
    timer = await store.get_timer("ns", "inv-1")
    assert timer is not None
    assert timer.id == timer_id
    assert (timer.type, timer.payload, timer.subject, timer.correlation_id) == (
        "invoice.due",
        {"n": 1},
        "user-7",
        "c-1",
    )
    assert (timer.max_attempts, timer.expires_after, timer.priority) == (4, timedelta(hours=1), 3)
    assert timer.status is Status.SCHEDULED
    assert timer.run_at == timer.due_at
    assert timer.producer == "sql:postgres"
    (claimed,) = await store.claim_due("ns", None, NOW, 10, "n1", NOW + timedelta(seconds=30))
    assert claimed.timer.id == timer_id

    before = datetime.now(UTC)
    _, drawn, action, due_at = _one(
        pg_schema, "SELECT * FROM schedule('ns', 'reminder', delay => interval '1 day')"
    )
    assert action == "created"
    assert len(drawn) == 32
    assert int(drawn, 16) >= 0
    assert before + timedelta(days=1) <= due_at <= datetime.now(UTC) + timedelta(days=1)
    made = await store.get_timer("ns", drawn)
    assert made is not None
    assert made.payload is None
    assert made.max_attempts == 20


async def test_on_conflict_updates_keeps_or_refuses_as_the_python_api(
    pg_url: str, pg_schema: str, open_store: StoreFactory
) -> None:
    store = await _open(open_store, pg_url)
    call = "SELECT action, due_at FROM schedule('ns', 't', %s::jsonb, at => %s, key => 'k'{})"
    at1, at2 = "2030-01-01T00:00:00Z", "2030-06-01T00:00:00+02:00"
    assert _one(pg_schema, call.format(""), "1", at1)[0] == "created"
    assert _one(pg_schema, call.format(""), "1", at1)[0] == "kept"  # the same request again
    assert _one(pg_schema, call.format(""), "2", at2) == (
        "updated",
        datetime(2030, 5, 31, 22, tzinfo=UTC),
    )
    assert _one(pg_schema, call.format(", on_conflict => 'keep'"), "3", at1)[0] == "kept"
    with pytest.raises(psycopg.errors.UniqueViolation, match=r"^key: 'k' exists"):
        _one(pg_schema, call.format(", on_conflict => 'error'"), "3", at1)
    timer = await store.get_timer("ns", "k")
    assert timer is not None
    assert timer.payload == 2
    assert _one(pg_schema, "SELECT version FROM timers WHERE key = 'k'") == (2,)


async def test_emit_is_due_now_and_cancel_ends_a_pending_timer(
    pg_url: str, pg_schema: str, open_store: StoreFactory
) -> None:
    store = await _open(open_store, pg_url)
    before = datetime.now(UTC)
    _, key, action, due_at = _one(pg_schema, "SELECT * FROM emit('ns', 'order.paid', '7', 'o7')")
    assert (key, action) == ("o7", "created")
    assert before <= due_at <= datetime.now(UTC)
    assert _one(pg_schema, "SELECT action FROM emit('ns', 'order.paid', '8', 'o7')") == ("kept",)
    timer_id, status = _one(pg_schema, "SELECT * FROM cancel('ns', 'o7')")
    timer = await store.get_timer("ns", "o7")
    assert timer is not None
    assert (timer.id, timer.status, status) == (
        timer_id,
        Status.CANCELLED,
        "cancelled",
    )
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState, match=r"^key: timer 'o7'"):
        _one(pg_schema, "SELECT * FROM cancel('ns', 'o7')")
    with pytest.raises(psycopg.errors.NoDataFound, match=r"^key: no timer 'nope'"):
        _one(pg_schema, "SELECT * FROM cancel('ns', 'nope')")


async def test_schedule_many_stores_a_json_array_in_order_or_nothing(
    pg_url: str, pg_schema: str, open_store: StoreFactory
) -> None:
    store = await _open(open_store, pg_url)
    batch = [
        {"type": "a", "at": "2030-01-01T00:00:00Z", "key": "b1", "payload": {"x": 1}},
        {"type": "b", "delay": "PT5M", "subject": 42, "max_attempts": 3.0},
        {"type": "c", "local": "2030-07-01T09:00", "timezone": "Europe/Paris", "key": "b3"},
    ]
    with _connect(pg_schema) as conn:
        rows = conn.execute(
            "SELECT * FROM schedule_many('ns', %s::jsonb)", (json.dumps(batch),)
        ).fetchall()
        conn.commit()
    assert [row[2] for row in rows] == ["created"] * 3
    assert rows[0][1] == "b1"
    assert rows[2][1] == "b3"
    assert rows[2][3] is None
    second = await store.get_timer("ns", rows[1][1])
    assert second is not None
    assert (second.subject, second.max_attempts) == ("42", 3)

    bad = [{"type": "ok", "delay": 1, "key": "never"}, {"type": "ok", "delay": 1, "prio": 1}]
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=r"^\[1\]\.prio: is not a known"):
        _one(pg_schema, "SELECT * FROM schedule_many('ns', %s::jsonb)", json.dumps(bad))
    assert await store.get_timer("ns", "never") is None


async def test_a_trigger_schedules_a_follow_up_that_lives_and_dies_with_the_row(
    pg_url: str, pg_schema: str, open_store: StoreFactory
) -> None:
    """A follow-up scheduled by an INSERT trigger exists once the INSERT commits, and not at
    all when it rolls back; the wake-up is heard only after a commit."""
    store = await _open(open_store, pg_url)
    with _connect(pg_schema, autocommit=True) as conn:
        conn.execute("CREATE TABLE signups (id int PRIMARY KEY, email text)")
        conn.execute(
            """
            CREATE FUNCTION signup_follow_up() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                PERFORM schedule('ns', 'signup.nudge', jsonb_build_object('email', NEW.email),
                    delay => interval '1 day', key => 'nudge-' || NEW.id);
                RETURN NEW;
            END $$
            """
        )
        conn.execute(
            "CREATE TRIGGER signups_follow_up AFTER INSERT ON signups"
            " FOR EACH ROW EXECUTE FUNCTION signup_follow_up()"
        )
    channel = f"duetime_{pg_schema}"
    with _connect(pg_schema, autocommit=True) as listener:
        listener.execute(f'LISTEN "{channel}"')
        with _connect(pg_schema) as conn:
            conn.execute("INSERT INTO signups VALUES (1, 'a@example.com')")
            conn.rollback()
            conn.execute("INSERT INTO signups VALUES (2, 'b@example.com')")
            conn.commit()
        heard = [n.payload for n in listener.notifies(timeout=5, stop_after=1)]
    assert await store.get_timer("ns", "nudge-1") is None
    kept = await store.get_timer("ns", "nudge-2")
    assert kept is not None
    assert kept.payload == {"email": "b@example.com"}
    assert heard == [str(int(kept.due_at.timestamp() * 1_000_000))]


async def test_a_local_time_is_held_until_duetime_resolves_it(
    pg_url: str, pg_schema: str, open_store: StoreFactory
) -> None:
    """The wall time and zone are stored as given, the instant held (no claim takes it), and
    the materialiser's round gives it the instant the Python API would, or, for a zone
    duetime does not know, ends it dead saying why."""
    store = await _open(open_store, pg_url)
    for key, zone, wall in [
        ("paris", "Europe/Paris", "2025-03-30 02:30"),  # in the spring gap: 'compatible'
        ("mars", "Mars/Olympus_Mons", "2025-03-01 09:00"),
    ]:
        _one(
            pg_schema,
            "SELECT * FROM schedule('ns', 'wake', local => %s, timezone => %s, key => %s)",
            wall,
            zone,
            key,
        )
    held = await store.get_timer("ns", "paris")
    assert held is not None
    assert held.run_at == HELD_AT
    assert held.local == datetime(2025, 3, 30, 2, 30)
    assert held.timezone == "Europe/Paris"
    late = datetime(2026, 1, 1, tzinfo=UTC)
    assert await store.claim_due("ns", None, late, 10, "n1", late + timedelta(seconds=30)) == []

    assert await release_held(store.schedules, NOW) == 2
    resolved = await store.get_timer("ns", "paris")
    expected = to_utc(datetime(2025, 3, 30, 2, 30), load_zone("Europe/Paris"))
    assert resolved is not None
    assert resolved.due_at == resolved.run_at == expected
    dead = await store.get_timer("ns", "mars")
    assert dead is not None
    assert dead.status is Status.DEAD
    assert dead.last_error is not None
    assert dead.last_error.startswith("timezone: unknown IANA")
    assert await release_held(store.schedules, NOW) == 0


BAD_CALLS = [
    # (call, field, SQLSTATE)
    ("schedule('nope', 't', delay => '1s')", "namespace", "22023"),
    ("schedule(NULL, 't', delay => '1s')", "namespace", "22004"),
    ("schedule('ns', NULL, delay => '1s')", "type", "22004"),
    ("schedule('ns', 'bad type', delay => '1s')", "type", "22023"),
    ("schedule('ns', repeat('t', 201), delay => '1s')", "type", "22023"),
    ("schedule('ns', 't', to_jsonb(repeat('x', 300000)), delay => '1s')", "payload", "22001"),
    (
        "schedule('ns', 't', (repeat('[', 65) || repeat(']', 65))::jsonb, delay => '1s')",
        "payload",
        "22023",
    ),
    ("schedule('ns', 't', ('1' || repeat('0', 4300))::jsonb, delay => '1s')", "payload", "22023"),
    ("schedule('ns', 't')", "at", "22004"),
    ("schedule('ns', 't', at => '2030-01-01T09:00')", "at", "22007"),
    ("schedule('ns', 't', at => '2030-01-01 09:00'::timestamp)", "at", "22007"),
    ("schedule('ns', 't', at => 'tomorrow')", "at", "22007"),
    ("schedule('ns', 't', at => '2025-02-29T09:00Z')", "at", "22007"),
    ("schedule('ns', 't', at => '9100-01-01T00:00Z')", "at", "22023"),
    ("schedule('ns', 't', at => 5)", "at", "22023"),
    ("schedule('ns', 't', delay => '-1s')", "delay", "22023"),
    ("schedule('ns', 't', at => now(), delay => '1s')", "delay", "22023"),
    ("schedule('ns', 't', local => '2030-01-01 09:00')", "timezone", "22004"),
    ("schedule('ns', 't', local => '2030-01-01 09:00', timezone => 'EST')", "timezone", "22023"),
    (
        "schedule('ns', 't', local => '2030-01-01 09:00', timezone => 'Europe/../x')",
        "timezone",
        "22023",
    ),
    ("schedule('ns', 't', delay => '1s', timezone => 'Europe/Paris')", "timezone", "22023"),
    ("schedule('ns', 't', local => '1969-12-31 09:00', timezone => 'UTC')", "local", "22023"),
    ("schedule('ns', 't', delay => '1s', disambiguation => 'first')", "disambiguation", "22023"),
    ("schedule('ns', 't', delay => '1s', key => ' ')", "key", "22023"),
    ("schedule('ns', 't', delay => '1s', key => repeat('k', 256))", "key", "22001"),
    ("schedule('ns', 't', delay => '1s', key => E'a\\nb')", "key", "22023"),
    ("schedule('ns', 't', delay => '1s', subject => '')", "subject", "22023"),
    ("schedule('ns', 't', delay => '1s', subject => repeat('s', 256))", "subject", "22001"),
    ("schedule('ns', 't', delay => '1s', correlation_id => E'\\u2028')", "correlation_id", "22023"),
    ("schedule('ns', 't', delay => '1s', max_attempts => 0)", "max_attempts", "22023"),
    ("schedule('ns', 't', delay => '1s', max_attempts => 1001)", "max_attempts", "22023"),
    ("schedule('ns', 't', delay => '1s', expires_after => '0s')", "expires_after", "22023"),
    ("schedule('ns', 't', delay => '1s', priority => 10)", "priority", "22023"),
    ("schedule('ns', 't', delay => '1s', on_conflict => 'merge')", "on_conflict", "22023"),
    ("emit('ns', 't', key => '')", "key", "22023"),
    ("emit('ns', 't', priority => -1)", "priority", "22023"),
    ("emit('nope', 't')", "namespace", "22023"),
    ("emit('ns', '')", "type", "22004"),
    ("emit('ns', 't', to_jsonb(repeat('x', 300000)))", "payload", "22001"),
    ("emit('ns', 't', subject => repeat('s', 256))", "subject", "22001"),
    ("emit('ns', 't', correlation_id => ' ')", "correlation_id", "22023"),
    ("emit('ns', 't', max_attempts => 0)", "max_attempts", "22023"),
    ("schedule_many('nope', '[]')", "namespace", "22023"),
    ("schedule_many('ns', '[{\"type\": \"t\", \"delay\": 1}]', 'merge')", "on_conflict", "22023"),
    ("schedule_many('ns', '[5, 6]')", "[0]", "22023"),
    ('schedule_many(\'ns\', \'[{"type": "t", "delay": 1, "when": 1}]\')', "when", "22023"),
    ('schedule_many(\'ns\', \'[{"type": "t", "at": "2030-01-01T09:00"}]\')', "at", "22007"),
    ('schedule_many(\'ns\', \'[{"type": "t", "delay": 1, "key": ""}]\')', "key", "22023"),
    (
        'schedule_many(\'ns\', \'[{"type": "t", "delay": 1, "max_attempts": 0}]\')',
        "max_attempts",
        "22023",
    ),
    ("schedule_many('ns', '{}')", "timers", "22023"),
    ('schedule_many(\'ns\', \'[{"type": "t", "delay": "soon"}]\')', "delay", "22023"),
    (
        'schedule_many(\'ns\', \'[{"type": "t", "local": "2030-01-01T09:00+01:00",'
        ' "timezone": "UTC"}]\')',
        "local",
        "22023",
    ),
    ("schedule_many('ns', '[{\"type\": 5, \"delay\": 1}]')", "type", "22023"),
    (
        'schedule_many(\'ns\', \'[{"type": "t", "delay": 1, "priority": 1.5}]\')',
        "priority",
        "22023",
    ),
    (
        "schedule_columns('ns', ARRAY['a', 'b'], delays => ARRAY['1s']::interval[])",
        "types",
        "22023",
    ),
    (
        "schedule_columns('ns', ARRAY['a', 'b b'], delays => ARRAY['1s', '1s']::interval[])",
        "[1].type",
        "22023",
    ),
    (
        "schedule_columns('ns', ARRAY['a'], ats => ARRAY['2030-01-01 09:00'::timestamp])",
        "ats",
        "22007",
    ),
    (
        "schedule_columns('ns', ARRAY['a', 'b'], ats => ARRAY['2030-01-01T09:00Z', '2030-01-01'])",
        "[1].at",
        "22007",
    ),
    (
        "schedule_columns('ns', ARRAY['a'], delays => ARRAY['1s']::interval[],"
        " keys => ARRAY[repeat('k', 256)])",
        "key",
        "22001",
    ),
    ("schedule_columns(NULL, ARRAY['a'], delays => ARRAY['1s']::interval[])", "namespace", "22004"),
    ("schedule_columns('ns', NULL)", "types", "22004"),
    (
        "schedule_columns('ns', ARRAY['a'], ARRAY[to_jsonb(repeat('x', 300000))],"
        " delays => ARRAY['1s']::interval[])",
        "payload",
        "22001",
    ),
    ("schedule_columns('ns', ARRAY['a'], delays => ARRAY['-1s']::interval[])", "delay", "22023"),
    (
        "schedule_columns('ns', ARRAY['a'], delays => ARRAY['1s']::interval[],"
        " subjects => ARRAY[''])",
        "subject",
        "22023",
    ),
    (
        "schedule_columns('ns', ARRAY['a'], delays => ARRAY['1s']::interval[],"
        " max_attempts => ARRAY[0])",
        "max_attempts",
        "22023",
    ),
    (
        "schedule_columns('ns', ARRAY['a'], delays => ARRAY['1s']::interval[],"
        " priorities => ARRAY[10])",
        "priority",
        "22023",
    ),
    (
        "schedule_columns('ns', ARRAY['a'], delays => ARRAY['1s']::interval[],"
        " on_conflict => 'merge')",
        "on_conflict",
        "22023",
    ),
    ("schedule_columns('ns', ARRAY['a'], ats => ARRAY[1, 2])", "ats", "22023"),
    ("cancel('nope', 'k')", "namespace", "22023"),
    ("cancel('ns', NULL)", "key", "22004"),
    ("cancel('ns', repeat('k', 400))", "key", "22001"),
]


@pytest.mark.parametrize(("call", "field", "sqlstate"), BAD_CALLS)
async def test_bad_input_names_its_field_and_stores_nothing(
    pg_url: str, pg_schema: str, open_store: StoreFactory, call: str, field: str, sqlstate: str
) -> None:
    await _open(open_store, pg_url)
    with _connect(pg_schema) as conn, pytest.raises(psycopg.Error) as caught:
        conn.execute(f"SELECT * FROM {call}")
    error = caught.value.diag
    assert (error.sqlstate, error.column_name, error.message_detail) == (
        sqlstate,
        field,
        f"field: {field}",
    )
    assert error.message_primary is not None
    assert error.message_primary.startswith(f"{field}: ")
    assert _one(pg_schema, "SELECT count(*) FROM timers") == (0,)


async def test_a_plain_batch_is_written_as_a_set_like_any_other(
    pg_url: str, pg_schema: str, open_store: StoreFactory
) -> None:
    """A batch of plain timers takes the set-based write (sql_simple_batch): its rows are the
    ones the row-by-row path writes, kept keys answer with their timer, and on_conflict
    'error' names the element whose key exists."""
    store = await _open(open_store, pg_url)
    at = "2030-01-01T00:00:00Z"
    plain = [
        {"type": "a", "at": at, "payload": {"n": 1}, "key": "p1", "subject": "s", "priority": 2},
        {"type": "a", "delay": 60, "key": "p2", "max_attempts": 4},
    ]
    with _connect(pg_schema) as conn:
        assert conn.execute(
            "SELECT sql_simple_batch(%s::jsonb, 'keep', 262144)", (json.dumps(plain),)
        ).fetchone() == (True,)
        first = conn.execute(
            "SELECT * FROM schedule_many('ns', %s::jsonb, 'keep')", (json.dumps(plain),)
        ).fetchall()
        # the same timers with a field only the row-by-row path takes
        slow = [{**t, "key": f"s{t['key'][1:]}", "correlation_id": "c"} for t in plain]
        assert conn.execute(
            "SELECT sql_simple_batch(%s::jsonb, 'keep', 262144)", (json.dumps(slow),)
        ).fetchone() == (False,)
        conn.execute("SELECT * FROM schedule_many('ns', %s::jsonb, 'keep')", (json.dumps(slow),))
        again = conn.execute(
            "SELECT * FROM schedule_many('ns', %s::jsonb, 'keep')", (json.dumps(plain),)
        ).fetchall()
        conn.commit()
        with pytest.raises(psycopg.errors.UniqueViolation) as refused:
            conn.execute(
                "SELECT * FROM schedule_many('ns', %s::jsonb, 'error')",
                (json.dumps([{"type": "a", "delay": 1, "key": "new"}, plain[1]]),),
            )
        assert refused.value.diag.column_name == "[1].key"
    assert [row[2] for row in first] == ["created", "created"]
    assert first[0][0] < first[1][0]
    assert [(row[0], row[2], row[3]) for row in again] == [
        (row[0], "kept", row[3]) for row in first
    ]
    for fast_key, slow_key in (("p1", "s1"), ("p2", "s2")):
        fast, slow_made = (
            await store.get_timer("ns", fast_key),
            await store.get_timer("ns", slow_key),
        )
        assert fast is not None
        assert slow_made is not None
        same = ("type", "payload", "subject", "status", "max_attempts", "priority", "producer")
        assert [getattr(fast, f) for f in same] == [getattr(slow_made, f) for f in same]
    assert await store.get_timer("ns", "new") is None


async def test_a_worker_round_resolves_a_held_time_then_delivers_it(
    pg_url: str, pg_schema: str
) -> None:
    """End to end: ``tick`` (a worker's round with its services) gives the held timer its
    instant by duetime's rules and then delivers it, at that instant and not before."""
    from duetime import AsyncApp, FrozenClock

    clock = FrozenClock(NOW - timedelta(minutes=1))
    app = AsyncApp(pg_url, "ns", clock=clock)
    seen: list[str] = []

    @app.handler("lunch")
    async def lunch(event: Any) -> None:
        seen.append(event.key)

    await app.open()
    try:
        # 13:00 in Paris on 1 March 2025 is 12:00 UTC: NOW
        _one(
            pg_schema,
            "SELECT * FROM schedule('ns', 'lunch', local => '2025-03-01 13:00',"
            " timezone => 'Europe/Paris', key => 'lunch')",
        )
        await app.tick()
        timer = await app.get("lunch")
        assert timer.due_at == timer.run_at == NOW
        assert seen == []  # a minute early: not yet
        clock.set(NOW)
        await app.tick()
        assert seen == ["lunch"]
    finally:
        await app.close()


async def test_schedule_columns_takes_a_batch_as_arrays(
    pg_url: str, pg_schema: str, open_store: StoreFactory
) -> None:
    """The array form: drawn keys as a set, given keys through the same writes as one
    schedule() each (updated, kept), in input order."""
    store = await _open(open_store, pg_url)
    with _connect(pg_schema) as conn:
        drawn = conn.execute(
            "SELECT * FROM schedule_columns('ns', ARRAY['a', 'b'],"
            " ARRAY['{\"n\": 1}', '2']::jsonb[],"
            " ats => ARRAY['2030-01-01T00:00Z', '2030-01-02T00:00Z']::timestamptz[],"
            " subjects => ARRAY['s1', NULL], priorities => ARRAY[1, 0])"
        ).fetchall()
        given = conn.execute(
            "SELECT timer_key, action FROM schedule_columns('ns', ARRAY['c', 'c'],"
            " delays => ARRAY['1h', '2h']::interval[], keys => ARRAY['k1', 'k2'])"
        ).fetchall()
        again = conn.execute(
            "SELECT timer_key, action FROM schedule_columns('ns', ARRAY['c', 'c'],"
            " delays => ARRAY['1h', '3h']::interval[], keys => ARRAY['k1', 'k2'],"
            " on_conflict => 'keep')"
        ).fetchall()
        conn.commit()
    assert [row[2] for row in drawn] == ["created", "created"]
    assert drawn[0][0] < drawn[1][0]
    assert len(drawn[0][1]) == 32
    assert drawn[0][1] != drawn[1][1]
    first = await store.get_timer("ns", drawn[0][1])
    assert first is not None
    assert (first.type, first.payload, first.subject, first.priority) == ("a", {"n": 1}, "s1", 1)
    assert first.due_at == datetime(2030, 1, 1, tzinfo=UTC)
    assert given == [("k1", "created"), ("k2", "created")]
    assert again == [("k1", "kept"), ("k2", "kept")]


async def test_migrating_an_older_schema_adds_the_functions_beside_its_rows(
    pg_fresh_url: str, pg_fresh_schema: str, open_store: StoreFactory, monkeypatch: Any
) -> None:
    """A schema made before the SQL functions (up to migration 0028) keeps its rows, and
    ``duetime migrate`` adds the functions (0029, 0030), which then work alongside them."""
    import duetime.store.postgres.schema as schema

    older = [m for m in schema.MIGRATIONS if m[0] <= 28]
    monkeypatch.setattr(schema, "MIGRATIONS", older)
    store = await _open(open_store, pg_fresh_url)
    await store.put_timers([new_timer("before", type="t")], "error", NOW)
    with _connect(pg_fresh_schema) as conn:
        assert conn.execute("SELECT to_regproc('schedule_many')").fetchone() == (None,)
    monkeypatch.undo()

    assert (await store.migrate())[:2] == [29, 30]
    _, _, action, _ = _one(
        pg_fresh_schema, "SELECT * FROM schedule('ns', 't', delay => '1m', key => 'after')"
    )
    assert action == "created"
    assert _one(pg_fresh_schema, "SELECT action FROM emit('ns', 't', key => 'before')") == ("kept",)
    assert await store.get_timer("ns", "before") is not None
