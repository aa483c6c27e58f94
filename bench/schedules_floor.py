"""The floor under materialising a million schedules on PostgreSQL: the server's work alone.

Run by hand (not part of the test suite)::

    .venv/bin/python bench/schedules_floor.py                  # 3 alternating rounds, ~8 min
    .venv/bin/python bench/schedules_floor.py --rounds 1 --count 200000

``schedules_bench.py``'s million per-user schedules (a daily cron at 09:MM in one of 20 zones)
are added once to a template database; each run materialises a fresh copy of it (``CREATE
DATABASE … TEMPLATE``, then a checkpoint), a day later, in one of three ways:

- ``duetime``: one ``Materializer.tick``, as ``schedules_bench.py`` times it.
- ``floor``: no client work at all. ``--lanes`` connections walk the table in windows of
  ``--batch`` ids, one statement a window that locks the due rows, moves each a day on (right
  for these rules: no zone changes its offset on those days), makes the key in SQL and inserts
  the key and the timer: the rows and index entries duetime writes, with none of its planning
  (cron in zones, catch-up, overlap), reading or sending.
- ``timers``: the same number of plain timers and their keys inserted the same way (``INSERT …
  SELECT`` from ``generate_series``): what storing the timers alone costs the server.

Each run prints its wall time, the CPU of PostgreSQL's processes (``/proc``, the server on this
machine) and of this process, and a checksum of what it made (every timer's key, due instant
and schedule, and every schedule's next occurrence): the ``duetime`` and ``floor`` runs must
agree, or the floor did not do the same job.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).parent))
from schedules_bench import T0, requests

from duetime import AsyncApp, FrozenClock
from duetime.services.materializer import Materializer

SEED = "duetime_floor_seed"
RUN = "duetime_floor_run"
NAMESPACE = "bench"

FLOOR = """
WITH locked AS (
    SELECT id, name, next_at, namespace, type, payload, subject, max_attempts
    FROM duetime.schedules
    WHERE id >= %(first)s AND id < %(stop)s AND namespace = 'bench' AND active
      AND next_at <= %(now)s
    ORDER BY id
    FOR UPDATE
), moved AS (
    UPDATE duetime.schedules AS s
    SET next_at = s.next_at + interval '1 day', after_at = s.next_at, last_at = s.next_at,
        version = s.version + 1
    FROM locked WHERE s.id = locked.id
    RETURNING locked.*
), t AS (
    SELECT moved.*, nextval('duetime.timers_id_seq') AS timer_id,
        'schedule:' || name || ':'
        || to_char(next_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS key
    FROM moved
), keyed AS (
    INSERT INTO duetime.timer_keys (namespace, key, timer_id)
    SELECT namespace, key, timer_id FROM t
)
INSERT INTO duetime.timers (id, namespace, key, type, payload, subject, due_at, run_at,
    status, max_attempts, registered_at, updated_at, schedule_id) OVERRIDING SYSTEM VALUE
SELECT timer_id, namespace, key, type, payload, subject, next_at, next_at, 'scheduled',
    max_attempts, %(now)s, %(now)s, id
FROM t
"""

TIMERS = """
WITH t AS (
    SELECT nextval('duetime.timers_id_seq') AS timer_id, n, 'greet:user-' || n AS key
    FROM generate_series(%(first)s::bigint, %(stop)s::bigint - 1) AS n
), keyed AS (
    INSERT INTO duetime.timer_keys (namespace, key, timer_id) SELECT 'timers', key, timer_id FROM t
)
INSERT INTO duetime.timers (id, namespace, key, type, payload, subject, due_at, run_at,
    status, max_attempts, registered_at, updated_at) OVERRIDING SYSTEM VALUE
SELECT timer_id, 'timers', key, 'birthday.greeting', jsonb_build_object('user', n), 'user-' || n,
    %(now)s + make_interval(secs => 86400 + n %% 3600),
    %(now)s + make_interval(secs => 86400 + n %% 3600), 'scheduled', 25, %(now)s, %(now)s
FROM t
"""

CHECKSUM = """
SELECT (SELECT md5(string_agg(key || '|' || due_at::text || '|' || schedule_id::text, ','
                              ORDER BY key))
        FROM duetime.timers WHERE namespace = 'bench')
    || '/' ||
    (SELECT md5(string_agg(id::text || '|' || next_at::text, ',' ORDER BY id))
     FROM duetime.schedules)
"""


def admin(base: str, sql: str) -> None:
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(sql)


def server_cpu() -> float:
    """CPU seconds of every PostgreSQL process on this machine (the server is local)."""
    ticks = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/comm") as comm:
                if not comm.read().startswith("postgres"):
                    continue
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def own_cpu() -> float:
    times = os.times()
    return times.user + times.system


async def seed(base: str, count: int) -> float:
    admin(base, f"DROP DATABASE IF EXISTS {SEED}")
    admin(base, f"CREATE DATABASE {SEED}")
    app = AsyncApp(f"{base}/{SEED}", NAMESPACE, clock=FrozenClock(T0))
    await app.open()
    started = time.perf_counter()
    try:
        for start in range(0, count, 10_000):
            await app.schedules.add_many(
                requests(start, min(count, start + 10_000)), on_conflict="keep"
            )
    finally:
        await app.close()
    with psycopg.connect(f"{base}/{SEED}", autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
    return time.perf_counter() - started


async def walk(
    conn: psycopg.AsyncConnection[Any], sql: str, windows: list[range], now: object
) -> int:
    made = 0
    for window in windows:
        cursor = await conn.execute(sql, {"first": window.start, "stop": window.stop, "now": now})
        made += cursor.rowcount
    return made


async def run(base: str, mode: str, count: int, lanes: int, batch: int) -> dict[str, object]:
    admin(base, f"DROP DATABASE IF EXISTS {RUN}")
    admin(base, f"CREATE DATABASE {RUN} TEMPLATE {SEED}")
    url = f"{base}/{RUN}"
    now = T0 + timedelta(days=1)
    conns = [await psycopg.AsyncConnection.connect(url, autocommit=True) for _ in range(lanes)]
    try:
        await conns[0].execute("CHECKPOINT")
        row = await (
            await conns[0].execute("SELECT min(id), max(id) FROM duetime.schedules")
        ).fetchone()
        assert row is not None
        first, last = (0, count - 1) if mode == "timers" else row
        windows = [range(a, min(a + batch, last + 1)) for a in range(first, last + 1, batch)]
        if mode == "duetime":
            clock = FrozenClock(now)
            app = AsyncApp(url, NAMESPACE, clock=clock)
            await app.open()
            materializer = Materializer(
                app.store,
                clock,
                NAMESPACE,
                lookahead=timedelta(0),
                batch_size=batch,
                check_tzdata=False,
            )
        server, client, started = server_cpu(), own_cpu(), time.perf_counter()
        if mode == "duetime":
            try:
                made = await materializer.tick(now)
                wall = time.perf_counter() - started
                server, client = server_cpu() - server, own_cpu() - client
            finally:
                await app.close()
        else:
            sql = TIMERS if mode == "timers" else FLOOR
            parts = [walk(conns[i], sql, windows[i::lanes], now) for i in range(lanes)]
            made = sum(await asyncio.gather(*parts))
            wall = time.perf_counter() - started
            server, client = server_cpu() - server, own_cpu() - client
        checksum = ""
        if mode != "timers":
            found = await (await conns[0].execute(CHECKSUM)).fetchone()
            checksum = str(found[0] if found else "")[:14]
    finally:
        for conn in conns:
            await conn.close()
        admin(base, f"DROP DATABASE IF EXISTS {RUN}")
    assert made == count, (mode, made, count)
    return {
        "run": mode,
        "wall_s": round(wall, 1),
        "server_cpu_s": round(server, 1),
        "client_cpu_s": round(client, 1),
        "load": round(os.getloadavg()[0], 2),
        "checksum": checksum,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--lanes", type=int, default=2, help="connections of the floor runs")
    parser.add_argument("--batch", type=int, default=500, help="schedules a statement")
    parser.add_argument("--modes", default="duetime,floor,timers")
    parser.add_argument(
        "--pg",
        default="postgresql://postgres@127.0.0.1:5432",
        help="the server, without a database: the script makes and drops its own",
    )
    args = parser.parse_args()
    print(f"$ {' '.join(sys.argv)}  (load average {os.getloadavg()[0]:.2f})", flush=True)
    seconds = asyncio.run(seed(args.pg, args.count))
    print(f"seeded {args.count} schedules in {seconds:.1f} s", flush=True)
    try:
        print(f"{'run':<8} {'wall':>7} {'server CPU':>11} {'client CPU':>11} {'load':>5}  checksum")
        for _ in range(args.rounds):
            for mode in args.modes.split(","):
                r = asyncio.run(run(args.pg, mode, args.count, args.lanes, args.batch))
                print(
                    f"{r['run']:<8} {r['wall_s']:>6}s {r['server_cpu_s']:>10}s "
                    f"{r['client_cpu_s']:>10}s {r['load']:>5}  {r['checksum']}",
                    flush=True,
                )
    finally:
        admin(args.pg, f"DROP DATABASE IF EXISTS {SEED}")


if __name__ == "__main__":
    main()
