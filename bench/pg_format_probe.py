"""Does formatting the claimed rows cost the server much? Text against binary results.

Run by hand (not part of the test suite)::

    .venv/bin/python bench/pg_format_probe.py            # 60,000 timers, claims of 100

Schedules ``-n`` timers due now into a fresh database ``dtformat`` (dropped first), analyses
the table, then claims them all with the store's own statements (``claim_in_order`` and
``claim_due`` in one transaction), switching between psycopg's text and binary result formats
every 20 claims, and prints for each format the claiming backend's CPU (from /proc, so run it
on the database's machine) and the wall time, per claimed row.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from datetime import UTC, datetime, timedelta

import psycopg

from duetime import AsyncApp, TimerRequest
from duetime.store.postgres.settings import parse_url
from duetime.store.postgres.working import claim_params
from duetime.store.queries import load_queries, query_files

DB = "dtformat"


def admin(base: str, sql: str) -> None:
    with psycopg.connect(base + "/postgres", autocommit=True) as conn:
        conn.execute(sql)


async def load(url: str, n: int) -> None:
    async with AsyncApp(url) as app:
        for start in range(0, n, 1000):
            batch = range(start, min(n, start + 1000))
            await app.timers.schedule_many(
                [TimerRequest("bench.noop", {"due": 1.0 * i}, delay=0) for i in batch]
            )


def backend_cpu(pid: int) -> float:
    """User + system CPU seconds of a local process."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument("-n", type=int, default=60_000)
    args = parser.parse_args()
    admin(args.base, f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    admin(args.base, f"CREATE DATABASE {DB}")
    url = f"{args.base}/{DB}?schema=duetime"
    asyncio.run(load(url, args.n))
    queries = load_queries("duetime.store.postgres", *query_files("duetime.store.postgres"))
    totals = {False: [0.0, 0, 0.0], True: [0.0, 0, 0.0]}  # cpu s, rows, wall s
    with psycopg.connect(parse_url(url).conninfo, autocommit=True) as conn:
        conn.execute("ANALYZE timers")
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        pid = row[0]
        claims = 0
        while True:
            binary = (claims // 20) % 2 == 1
            claims += 1
            now = datetime.now(UTC)
            params = {
                "namespace": "default",
                **claim_params(["bench.noop"]),
                "now": now,
                "limit": 100,
                "node_id": "probe",
                "lease_until": now + timedelta(seconds=30),
            }
            cpu, started = backend_cpu(pid), time.perf_counter()
            with conn.transaction():
                conn.execute(queries["claim_in_order"], {"claim_commit": "off"})
                rows = conn.execute(queries["claim_due"], params, binary=binary).fetchall()
            wall, cpu = time.perf_counter() - started, backend_cpu(pid) - cpu
            if not rows:
                break
            total = totals[binary]
            total[0] += cpu
            total[1] += len(rows)
            total[2] += wall
    admin(args.base, f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    for binary, (cpu_s, count, wall_s) in totals.items():
        name = "binary" if binary else "text"
        print(
            f"{name:>6}: backend CPU {cpu_s / count * 1e6:.1f} µs a claimed row, "
            f"wall {wall_s / count * 1e6:.1f} µs a row, over {count:,} rows"
        )


if __name__ == "__main__":
    main()
