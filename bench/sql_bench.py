"""What scheduling from SQL costs the server, against the Python ``schedule_many``.

Run by hand (not part of the test suite)::

    .venv/bin/python bench/sql_bench.py                 # 20,000 timers a form, batches of 1,000
    .venv/bin/python bench/sql_bench.py -n 60000 --batch 500 --single 6000 --rounds 3

Into a fresh database ``dtsqlbench`` it schedules ``-n`` timers due in an hour four ways, the
forms alternating over ``--rounds`` rounds (a load that changes meanwhile weighs on each
alike), and prints the server backends' CPU a timer (``/proc``'s utime + stime of every client
backend of the database), each SQL form's ratio to the Python path's, and the load average:

* ``python``: ``AsyncApp.timers.schedule_many`` in batches of ``--batch``;
* ``sql batch``: ``SELECT * FROM schedule_many(ns, jsonb)``, one JSON array of ``--batch``
  timers a statement, each statement its own transaction;
* ``sql columns``: ``SELECT * FROM schedule_columns(ns, types, payloads, ats)``, one array a
  column (sent in binary), ``--batch`` timers a statement;
* ``sql one``: ``SELECT * FROM schedule(...)`` one timer a statement (``--single`` of them),
  each its own transaction, as a trigger or a service sending one at a time does.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from datetime import UTC, datetime

import psycopg
from psycopg.types.json import Jsonb

from duetime import AsyncApp, TimerRequest

DB = "dtsqlbench"


def admin(base: str, sql: str) -> None:
    with psycopg.connect(base + "/postgres", autocommit=True) as conn:
        conn.execute(sql)


def backend_cpu(base: str) -> float:
    """CPU seconds of the client backends of the bench's database (not autovacuum's, which
    the earlier forms' rows set off while a later form is measured)."""
    with psycopg.connect(base + "/postgres", autocommit=True) as conn:
        pids = [
            row[0]
            for row in conn.execute(
                "SELECT pid FROM pg_stat_activity"
                " WHERE datname = %s AND backend_type = 'client backend'",
                (DB,),
            )
        ]
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


async def python_form(base: str, n: int, batch: int) -> float:
    async with AsyncApp(f"{base}/{DB}?schema=duetime", "bench") as app:
        at = datetime.fromtimestamp(time.time() + 3600, UTC)
        await app.timers.schedule_many([TimerRequest("bench.warm", None, at=at)])
        before = backend_cpu(base)
        for _ in range(0, n, batch):
            await app.timers.schedule_many(
                [TimerRequest("bench.noop", {"n": i}, at=at) for i in range(batch)]
            )
        return (backend_cpu(base) - before) / n


def sql_batch_form(base: str, n: int, batch: int) -> float:
    at = datetime.fromtimestamp(time.time() + 3600, UTC).isoformat()
    with psycopg.connect(f"{base}/{DB}", autocommit=True, options="-c search_path=duetime") as c:
        c.execute("SELECT * FROM schedule('bench', 'bench.warm', delay => '1h')")
        before = backend_cpu(base)
        for _ in range(0, n, batch):
            timers = [{"type": "bench.noop", "payload": {"n": i}, "at": at} for i in range(batch)]
            c.execute("SELECT * FROM schedule_many('bench', %s::jsonb)", (json.dumps(timers),))
        return (backend_cpu(base) - before) / n


def sql_columns_form(base: str, n: int, batch: int) -> float:
    at = datetime.fromtimestamp(time.time() + 3600, UTC)
    with psycopg.connect(f"{base}/{DB}", autocommit=True, options="-c search_path=duetime") as c:
        before = backend_cpu(base)
        for _ in range(0, n, batch):
            c.execute(
                "SELECT * FROM schedule_columns('bench', %b::text[], %b::jsonb[],"
                " %b::timestamptz[])",
                (
                    ["bench.noop"] * batch,
                    [Jsonb({"n": i}) for i in range(batch)],
                    [at] * batch,
                ),
            )
        return (backend_cpu(base) - before) / n


def sql_single_form(base: str, n: int) -> float:
    at = datetime.fromtimestamp(time.time() + 3600, UTC)
    with psycopg.connect(f"{base}/{DB}", autocommit=True, options="-c search_path=duetime") as c:
        before = backend_cpu(base)
        for i in range(n):
            c.execute(
                "SELECT * FROM schedule('bench', 'bench.noop', %s::jsonb, at => %s::timestamptz)",
                (json.dumps({"n": i}), at),
            )
        return (backend_cpu(base) - before) / n


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument("-n", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--single", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    admin(args.base, f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    admin(args.base, f"CREATE DATABASE {DB}")
    load = os.getloadavg()[0]
    # The forms alternate, round after round, so a load that changes meanwhile (other work on
    # the machine) weighs on each alike; each figure is the total over the rounds.
    n, single = args.n // args.rounds, args.single // args.rounds
    totals = dict.fromkeys(("python", "batch", "columns", "single"), 0.0)
    ratios: list[float] = []
    try:
        for _ in range(args.rounds):
            python = await python_form(args.base, n, args.batch)
            batch = sql_batch_form(args.base, n, args.batch)
            totals["python"] += python
            totals["batch"] += batch
            totals["columns"] += sql_columns_form(args.base, n, args.batch)
            totals["single"] += sql_single_form(args.base, single)
            ratios.append(batch / python)
    finally:
        admin(args.base, f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    python, batch = totals["python"], totals["batch"]
    columns, single = totals["columns"], totals["single"]
    rounds = args.rounds
    print(f"load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")
    print(f"server CPU a timer: python schedule_many {python / rounds * 1e6:.1f} us")
    print(
        f"  sql schedule_many (JSON) {batch / rounds * 1e6:.1f} us  ratio {batch / python:.2f}"
        f" (rounds {min(ratios):.2f}..{max(ratios):.2f})"
    )
    print(
        f"  sql schedule_columns (arrays) {columns / rounds * 1e6:.1f} us"
        f"  ratio {columns / python:.2f}"
    )
    print(
        f"  sql schedule, one a statement {single / rounds * 1e6:.1f} us"
        f"  ratio {single / python:.2f}"
    )


if __name__ == "__main__":
    asyncio.run(main())
