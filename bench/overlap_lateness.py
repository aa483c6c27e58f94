"""How late schedules' occurrences start, by overlap policy: ``allow``, ``skip``, ``buffer_one``.

Run by hand (not part of the test suite)::

    .venv/bin/python bench/overlap_lateness.py sqlite:////tmp/overlap.db
    .venv/bin/python bench/overlap_lateness.py 'postgresql://postgres@127.0.0.1/test?schema=lat'
    PYTHONPATH=/old/src .venv/bin/python bench/overlap_lateness.py …    # an older version

One worker runs three schedules, one per policy, every two seconds, for ``--seconds``; each
handler records how long after its occurrence's instant it started (this machine's clock; on
PostgreSQL the database runs on it too). The first occurrence of each is left out (the worker
may start after it). Handlers are quick, so no occurrence overlaps another: every policy should
start as punctually as ``allow``. Give the PostgreSQL schema a fresh name each run.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from duetime import AsyncApp, Event

POLICIES = ("allow", "skip", "buffer_one")


async def measure(url: str, seconds: float) -> dict[str, list[float]]:
    app = AsyncApp(url, "bench")
    late: dict[str, list[float]] = {policy: [] for policy in POLICIES}

    def recorder(policy: str) -> Callable[[Event], Awaitable[None]]:
        async def handler(event: Event) -> None:
            late[policy].append((datetime.now(UTC) - event.due_at).total_seconds() * 1000)

        return handler

    for policy in POLICIES:
        app.handler(f"job.{policy}")(recorder(policy))
    async with app:
        for policy in POLICIES:
            await app.schedules.add(policy, f"job.{policy}", every="PT2S", overlap=policy)
        worker = app.worker()
        running = asyncio.create_task(worker.run())
        await asyncio.sleep(seconds)
        worker.stop()
        await running
    return late


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args()
    late = asyncio.run(measure(args.url, args.seconds))
    for policy, values in late.items():
        values = values[1:]
        if not values:
            print(f"{policy:<10} no occurrence started")
            continue
        print(
            f"{policy:<10} {len(values):>3} starts, lateness median "
            f"{statistics.median(values):.0f} ms, max {max(values):.0f} ms"
        )


if __name__ == "__main__":
    main()
