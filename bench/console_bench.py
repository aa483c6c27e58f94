"""How soon each console view has its first rows, at 200,000 timers, on both stores.

Run by hand (not part of the test suite)::

    .venv/bin/python bench/console_bench.py                       # SQLite and PostgreSQL
    .venv/bin/python bench/console_bench.py --stores sqlite -n 50000 --rounds 3

It writes ``-n`` timers straight into a fresh database (one INSERT … SELECT: SQLite, a file in a
temporary directory; PostgreSQL, a schema ``dtbench_console_<random>`` of ``DUETIME_TEST_PG``,
dropped afterwards) — 70 % done, 10 % dead, 15 % scheduled, the rest cancelled, retrying and
expired, over 25 event types, finished over the last 7 days — plus a schedule and a limit, then
starts ``duetime serve --no-worker`` on it and asks each view's API calls as the console does:
all of a view's calls at once. For each view it prints, as medians over ``--rounds``:

* **first rows** — when the call that draws the view's first rows answered (the overview's
  dead letters and next due, the timers list, …): what the reader waits for;
* **all** — when the view's last call answered (the overview's counts and charts included);
* each call alone, one after another, so a slow one is named.

The 1-minute load average is printed before and after: the machine may be shared.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import psycopg

from duetime import AsyncApp

PG_URL = os.environ.get("DUETIME_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
NS = "shop"
US = 1_000_000

# The status of row i, by i % 100: the mix of a namespace that has run for a while.
STATUS_SQL = """CASE
    WHEN i % 100 < 70 THEN 'done' WHEN i % 100 < 80 THEN 'dead'
    WHEN i % 100 < 95 THEN 'scheduled' WHEN i % 100 < 98 THEN 'cancelled'
    WHEN i % 100 < 99 THEN 'retrying' ELSE 'expired' END"""

SQLITE_SEED = f"""
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {{n}}),
rows AS (SELECT i, {STATUS_SQL} AS status FROM n)
INSERT INTO timers (namespace, key, type, payload, due_at, run_at, status, attempts,
    max_attempts, registered_at, updated_at, fired_at, completed_at, last_error)
SELECT '{NS}', 'k' || i, 'type.' || (i % 25), '{{{{"n": ' || i || '}}}}',
    CASE WHEN status IN ('scheduled', 'retrying') THEN {{now}} + (i % 86400) * {US}
         ELSE {{now}} - (i % 604800) * {US} END,
    CASE WHEN status IN ('scheduled', 'retrying') THEN {{now}} + (i % 86400) * {US}
         ELSE {{now}} - (i % 604800) * {US} END,
    status, CASE WHEN status IN ('scheduled', 'cancelled', 'expired') THEN 0 ELSE 1 END, 3,
    {{now}} - 604800 * {US}, {{now}},
    CASE WHEN status IN ('done', 'dead') THEN {{now}} - (i % 604800) * {US} END,
    CASE WHEN status IN ('done', 'dead', 'cancelled', 'expired')
         THEN {{now}} - (i % 604800) * {US} END,
    CASE WHEN status = 'dead' THEN 'RuntimeError: boom ' || i END
FROM rows
"""
PG_SEED = f"""
INSERT INTO timers (namespace, key, type, payload, due_at, run_at, status, attempts,
    max_attempts, registered_at, updated_at, fired_at, completed_at, last_error)
SELECT '{NS}', 'k' || i, 'type.' || (i % 25), jsonb_build_object('n', i),
    CASE WHEN status IN ('scheduled', 'retrying') THEN now() + (i % 86400) * interval '1 s'
         ELSE now() - (i % 604800) * interval '1 s' END,
    CASE WHEN status IN ('scheduled', 'retrying') THEN now() + (i % 86400) * interval '1 s'
         ELSE now() - (i % 604800) * interval '1 s' END,
    status, CASE WHEN status IN ('scheduled', 'cancelled', 'expired') THEN 0 ELSE 1 END, 3,
    now() - interval '7 days', now(),
    CASE WHEN status IN ('done', 'dead') THEN now() - (i % 604800) * interval '1 s' END,
    CASE WHEN status IN ('done', 'dead', 'cancelled', 'expired')
         THEN now() - (i % 604800) * interval '1 s' END,
    CASE WHEN status = 'dead' THEN 'RuntimeError: boom ' || i END
FROM (SELECT i, {STATUS_SQL} AS status FROM generate_series(1, {{n}}) AS i) AS rows;
INSERT INTO timer_keys (namespace, key, timer_id)
SELECT namespace, key, id FROM timers WHERE namespace = '{NS}';
ANALYZE timers;
"""

P = f"/v1/namespaces/{NS}"
VIEWS: dict[str, list[str]] = {
    # The first path of each draws the view's first rows; the console asks all at once.
    "overview": [
        f"{P}/timers?status=dead&limit=10",
        f"{P}/dead/types?limit=10",
        f"{P}/limits?limit=1000",
        f"{P}/stats?counts=false",
        f"{P}/counts",
        f"{P}/charts?range=1h",
    ],
    "timers": [f"{P}/timers?limit=50"],
    "timers?status=dead": [f"{P}/timers?status=dead&limit=50"],
    "timers?type=type.7": [f"{P}/timers?type=type.7&limit=50"],
    "schedules": [f"{P}/schedules?limit=100"],
    "events": [f"{P}/events?limit=50"],
    "limits": [f"{P}/limits?limit=1000"],
    "nodes": ["/v1/nodes"],
    "audit": [f"{P}/audit?limit=50"],
    "charts 24h": [f"{P}/charts?range=24h"],
    "charts 7d": [f"{P}/charts?range=7d"],
}


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


async def seed(url: str, n: int) -> None:
    app = AsyncApp(database_url=url, namespace=NS)
    await app.open()  # the schema; the timers are written behind its back
    try:
        started = time.perf_counter()
        if url.startswith("sqlite"):
            import sqlite3

            with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
                conn.execute(SQLITE_SEED.format(n=n, now=int(time.time() * US)))
                conn.execute("ANALYZE")
        else:
            schema = url.split("schema=")[1]
            with psycopg.connect(PG_URL, options=f"-c search_path={schema}") as conn:
                conn.execute(PG_SEED.format(n=n))
        print(f"  seeded {n:,} timers in {time.perf_counter() - started:.1f} s")
        await app.schedules.add("daily-report", "report.daily", cron="0 9 * * *")
        await app.limits.set("type.1", concurrency=5)
    finally:
        await app.close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def serving(url: str) -> Iterator[str]:
    port = free_port()
    duetime = str(Path(sys.executable).parent / "duetime")
    env = {**os.environ, "DUETIME_DATABASE_URL": url}
    args = [duetime, "serve", "--no-worker", "--port", str(port)]
    process = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.1)  # waiting for a process to listen: nothing to be signalled by
        else:
            raise RuntimeError("duetime serve did not answer")
        yield base
    finally:
        process.terminate()
        process.wait(10)


async def timed(client: httpx.AsyncClient, path: str, started: float) -> float:
    answer = await client.get(path)
    answer.raise_for_status()
    return time.perf_counter() - started


async def measure(base: str, rounds: int) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=120) as client:
        for path in [p for paths in VIEWS.values() for p in paths]:
            await client.get(path)  # warm: the first read of a table pays the disk
        print(f"  {'view':<20} {'first rows':>11} {'all':>9}   each alone (ms)")
        for view, paths in VIEWS.items():
            first: list[float] = []
            last: list[float] = []
            alone: dict[str, list[float]] = {path: [] for path in paths}
            for _ in range(rounds):
                started = time.perf_counter()
                times = await asyncio.gather(*(timed(client, p, started) for p in paths))
                first.append(times[0])
                last.append(max(times))
                for path in paths:
                    alone[path].append(await timed(client, path, time.perf_counter()))
            each = ", ".join(
                f"{path.rsplit('/', 1)[-1]} {statistics.median(t) * 1000:.0f}"
                for path, t in alone.items()
            )
            print(
                f"  {view:<20} {statistics.median(first) * 1000:>8.0f} ms"
                f" {statistics.median(last) * 1000:>6.0f} ms   {each}"
            )


def run(store: str, n: int, rounds: int) -> None:
    print(f"{store}: load before {load()}")
    if store == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite:///{Path(tmp) / 'console.db'}"
            asyncio.run(seed(url, n))
            with serving(url) as base:
                asyncio.run(measure(base, rounds))
    else:
        schema = f"dtbench_console_{uuid.uuid4().hex[:8]}"
        url = f"{PG_URL}{'&' if '?' in PG_URL else '?'}schema={schema}"
        try:
            asyncio.run(seed(url, n))
            with serving(url) as base:
                asyncio.run(measure(base, rounds))
        finally:
            with psycopg.connect(PG_URL, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    print(f"{store}: load after {load()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", type=int, default=200_000, help="timers in the namespace")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per view (medians)")
    parser.add_argument("--stores", default="sqlite,postgres", help="sqlite, postgres or both")
    args = parser.parse_args()
    for store in args.stores.split(","):
        run(store.strip(), args.n, args.rounds)


if __name__ == "__main__":
    main()
