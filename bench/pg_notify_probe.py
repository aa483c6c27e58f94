"""Concurrent single emits on PostgreSQL, where every commit's WAL flush is slow.

Run by hand (not part of the test suite)::

    .venv/bin/python bench/pg_notify_probe.py                       # 8 producers, 2 ms flushes
    .venv/bin/python bench/pg_notify_probe.py --commit-delay 0      # this machine's own disk

Every ``emit()`` is one transaction that makes work due, so it wakes the workers with a
``NOTIFY``. PostgreSQL holds one global lock from a notifying transaction's pre-commit to its
end, WAL flush included: notifying commits run one at a time. Where a flush is quick (this
machine's disk: about 0.1 ms) that costs little; where it is slow (network storage, a busy
disk) it caps every writer together at one commit per flush.

``--commit-delay`` (µs) mimics slow flushes on this machine: it is PostgreSQL's
``commit_delay``, set for the probe's own connections only (with ``commit_siblings = 0``), so
each durable commit waits that long before its flush. ``--producers`` tasks each call
``emit()`` in a loop on one ``AsyncApp`` (pool of ``--producers`` connections) until
``--events`` are stored, in a fresh database ``dtnotify``; the rate is printed. No worker runs:
this is the writers' side only. Run it with ``PYTHONPATH`` set to another checkout's ``src`` to
compare versions, alternating.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

import psycopg

from duetime import AsyncApp

DB = "dtnotify"


def admin(base: str, sql: str) -> None:
    with psycopg.connect(base + "/postgres", autocommit=True) as conn:
        conn.execute(sql)


async def emit_all(url: str, producers: int, events: int) -> float:
    async with AsyncApp(url) as app:
        await app.emit("probe.warmup")
        left = events

        async def producer() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                await app.emit("probe.event", {"n": left})

        started = time.perf_counter()
        await asyncio.gather(*(producer() for _ in range(producers)))
        return events / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--producers", type=int, default=8)
    parser.add_argument("--events", type=int, default=4000)
    parser.add_argument("--commit-delay", type=int, default=2000, help="µs before each flush")
    parser.add_argument("--base", default="postgresql://postgres@127.0.0.1:5432")
    args = parser.parse_args()
    admin(args.base, f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    admin(args.base, f"CREATE DATABASE {DB}")
    options = f"-c commit_delay={args.commit_delay} -c commit_siblings=0"
    url = (
        f"{args.base}/{DB}?schema=duetime&pool_max={args.producers}"
        f"&options={options.replace(' ', '%20').replace('=', '%3D')}"
    )
    try:
        rate = asyncio.run(emit_all(url, args.producers, args.events))
    finally:
        admin(args.base, f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    print(
        f"{rate:,.0f} emits/s: {args.events:,} emit() calls from {args.producers} producers, "
        f"commit_delay {args.commit_delay} µs, load average {os.getloadavg()[0]:.2f}"
    )


if __name__ == "__main__":
    main()
