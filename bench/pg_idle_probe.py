"""Every transaction an idle PostgreSQL worker makes, attributed to what made it.

One worker process (``AsyncApp(url).worker().run()``, the real clock, default settings) on a
fresh database with ``--timers`` timers due over the hour after next, nothing due. After
``--settle`` seconds, for ``--seconds``: the database's ``xact_commit + xact_rollback`` from
``pg_stat_database`` (read from another database), and what the server logged for that
database meanwhile. The database alone (``ALTER DATABASE``, dropped with it at the end) is set
to ``log_min_duration_statement = 0`` (every simple query, every extended-protocol
parse/bind/execute), ``log_min_messages = debug4`` and ``trace_notify`` (the transactions a
backend makes without any statement: see below). The log is read from ``--log`` (a local
server; the user running this must be able to read it).

What counts as a transaction in ``pg_stat_database``: a simple query (even an empty one), each
sync of the extended protocol that closes work (one for a pipeline of statements; one for a
``Parse`` that prepares a statement outside a pipeline, psycopg's way after five executions),
a new session's start-up, and two kinds no client sends: an idle backend's **catch-up** with the
shared invalidation queue (every catalog change anywhere on the server — a ``CREATE TABLE`` in
another database — goes into one queue; a backend that falls behind while idle is signalled and
runs an empty transaction to catch up, so each idle connection of the worker pays for the
server's DDL), and a listening backend's read of the notification queue. The table lists them
by connection and cause::

    .venv/bin/python bench/pg_idle_probe.py                       # ~3.5 minutes
    PYTHONPATH=/tmp/before/src .venv/bin/python bench/pg_idle_probe.py --db dtidle_before

The log's counts are exact per statement; ``pg_stat_database`` is the total to trust (a backend
publishes its counts when idle, within 10 s, so a window's edges blur by a few).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import re
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime

import psycopg

WORKER = textwrap.dedent(
    """
    import asyncio, sys
    from duetime import AsyncApp, Event

    async def main(url):
        app = AsyncApp(url)

        @app.handler("bench.noop")
        async def noop(event: Event) -> None:
            print("ran early!", flush=True)

        await app.open()
        try:
            await app.worker().run()
        finally:
            await app.close()

    asyncio.run(main(sys.argv[1]))
    """
)

LINE = re.compile(r"^(\S+ \S+) UTC \[(\d+)\] (?:(\S*)@(\S*) )?(\w+):  (.*)$")
DURATION = re.compile(r"duration: [\d.]+ ms  (statement|parse|bind|execute) ?([^:]*): (.*)$")


def admin(base: str, sql: str) -> None:
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(sql)  # type: ignore[arg-type]


def xacts(base: str, db: str) -> int:
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        row = conn.execute(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s", [db]
        ).fetchone()
    return int(row[0]) if row else 0


def backends(base: str, db: str) -> set[str]:
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        rows = conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s", [db])
        return {str(row[0]) for row in rows.fetchall()}


async def install(url: str, timers: int) -> None:
    from duetime import AsyncApp, TimerRequest

    start = time.time() + 3600
    async with AsyncApp(url) as app:
        for first in range(0, timers, 1000):
            await app.timers.schedule_many(
                [
                    TimerRequest(
                        "bench.noop",
                        {"i": i},
                        at=datetime.fromtimestamp(start + 3600 * i / timers, UTC),
                    )
                    for i in range(first, min(timers, first + 1000))
                ]
            )


def shorten(sql: str) -> str:
    sql = " ".join(sql.split())
    return sql[:90] + ("…" if len(sql) > 90 else "")


def attribute(
    lines: list[str], db: str, before: set[str]
) -> tuple[collections.Counter[tuple[str, str]], dict[str, list[str]]]:
    """(pid label, what) → count of transactions the log shows; and each pid's first lines."""
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    first: dict[str, list[str]] = collections.defaultdict(list)
    in_block: dict[str, bool] = collections.defaultdict(bool)
    seen: set[str] = set()
    for raw in lines:
        m = LINE.match(raw)
        if not m or m.group(4) != db:
            continue
        pid, msg = m.group(2), m.group(6)
        if pid not in seen:
            seen.add(pid)
            if pid not in before:
                counts[(pid, "(new session: its start-up)")] += 1
        if msg.startswith("ProcessCatchupEvent outside transaction"):
            counts[(pid, "catch-up of an idle backend (shared invalidation queue)")] += 1
            continue
        if msg.startswith("ProcessIncomingNotify") and not in_block[pid]:
            counts[(pid, "reading the notification queue (LISTEN)")] += 1
            continue
        d = DURATION.match(msg)
        if not d:
            continue
        kind, name, sql = d.group(1), d.group(2).strip(), d.group(3)
        if len(first[pid]) < 3:
            first[pid].append(shorten(sql))
        upper = sql.strip().upper()
        if kind == "statement":
            if upper.startswith("BEGIN"):
                in_block[pid] = True
                continue
            if upper.startswith(("COMMIT", "ROLLBACK")):
                in_block[pid] = False
                counts[(pid, "a transaction block (BEGIN … COMMIT)")] += 1
                continue
            if not in_block[pid]:
                counts[(pid, "simple query: " + shorten(sql))] += 1
        elif kind == "parse" and name and name != "<unnamed>":
            counts[(pid, "prepare (parse + sync): " + shorten(sql))] += 1
        elif kind == "execute" and not in_block[pid]:
            counts[(pid, "execute: " + shorten(sql))] += 1
    return counts, first


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", default="postgresql://postgres@127.0.0.1:5432")
    ap.add_argument("--db", default="dtidle_probe")
    ap.add_argument("--timers", type=int, default=1000)
    ap.add_argument("--settle", type=float, default=140.0)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--log", default="/var/log/postgresql/postgresql-15-main.log")
    ap.add_argument("--raw", help="write the window's log lines of the database to this file")
    args = ap.parse_args()
    base, db = args.base.rstrip("/"), args.db
    url = f"{base}/{db}?schema=duetime"
    print("$", " ".join([os.path.basename(sys.executable), *sys.argv]))
    print("PYTHONPATH", os.environ.get("PYTHONPATH", "(unset)"), "| load", os.getloadavg())
    admin(base, f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
    admin(base, f'CREATE DATABASE "{db}"')
    try:
        asyncio.run(install(url, args.timers))
        for setting in (
            "log_min_duration_statement = 0",
            "log_min_messages = debug4",  # an idle backend's catch-up transaction says so
            "trace_notify = on",  # and so does one reading the notification queue
        ):
            admin(base, f'ALTER DATABASE "{db}" SET {setting}')
        worker = subprocess.Popen([sys.executable, "-c", WORKER, url])
        try:
            time.sleep(args.settle)
            with open(args.log, "rb") as f:
                f.seek(0, 2)
                offset = f.tell()
            pids = backends(base, db)
            x0, t0 = xacts(base, db), time.time()
            time.sleep(args.seconds)
            x1, elapsed = xacts(base, db), time.time() - t0
            with open(args.log, "rb") as f:
                f.seek(offset)
                lines = f.read().decode("utf-8", "replace").splitlines()
        finally:
            worker.terminate()
            worker.wait(30)
    finally:
        admin(base, f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')  # its settings go with it
    counts, first = attribute(lines, db, pids)
    if args.raw:
        with open(args.raw, "w") as out:
            out.writelines(line + "\n" for line in lines if f"@{db} " in line)
    total = sum(counts.values())
    print(
        f"\npg_stat_database: {x1 - x0} transactions in {elapsed:.1f} s = "
        f"{(x1 - x0) / elapsed:.3f}/s; the log shows {total} ({total / elapsed:.3f}/s); "
        f"load {os.getloadavg()}"
    )
    kinds: collections.Counter[str] = collections.Counter()
    for (_, what), n in counts.items():
        kinds[what.split(" (")[0] if what.startswith(("catch-up", "reading")) else "own"] += n
    print(
        "by cause: the worker's own statements {:.3f}/s; catch-ups {:.3f}/s ({} connections); "
        "notification queue reads {:.3f}/s".format(
            kinds["own"] / elapsed,
            kinds["catch-up of an idle backend"] / elapsed,
            len({pid for pid, what in counts if what.startswith("catch-up")}),
            kinds["reading the notification queue"] / elapsed,
        )
    )
    print("\nconnections (pid: first statements seen):")
    for pid, stmts in sorted(first.items()):
        print(f"  {pid}: " + " | ".join(s[:60] for s in stmts))
    print(f"\n{'count':>5} {'per s':>6}  pid      what")
    for (pid, what), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if n:
            print(f"{n:5d} {n / elapsed:6.3f}  {pid:8} {what}")


if __name__ == "__main__":
    main()
