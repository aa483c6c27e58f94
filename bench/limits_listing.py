"""How long listing a namespace's flow control rules takes with N rules, on SQLite or PostgreSQL.

Sets N limits (``t00000.*`` …) in a fresh namespace, with due timers of 100 of their types held
back under them (20 each), then times ``app.limits.list()`` — every rule with what it holds, the
work behind ``GET /v1/namespaces/{ns}/limits`` and ``duetime limits ls`` — a few times.

    .venv/bin/python bench/limits_listing.py --rules 2000 10000
    .venv/bin/python bench/limits_listing.py --rules 2000 --database-url postgresql://…/test

To time an older checkout, put its ``src`` first on ``PYTHONPATH`` (the script uses only
``set_limit``, ``schedule_many`` and ``limits``, which every version has).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
import uuid

import duetime
from duetime import AsyncApp
from duetime.requests import TimerRequest

HELD_TYPES = 100
HELD_EACH = 20


async def measure(url: str, rules: int, rounds: int) -> list[float]:
    os.environ["DUETIME_MAX_LIMITS"] = str(rules)  # ignored by versions without the cap
    namespace = f"bench-{uuid.uuid4().hex[:8]}"
    async with AsyncApp(url, namespace) as app:
        for start in range(0, rules, 200):
            await asyncio.gather(
                *(
                    app.limits.set(f"t{i:05}.*", concurrency=1)
                    for i in range(start, min(start + 200, rules))
                )
            )
        for kind in range(HELD_TYPES):
            type = f"t{kind * (rules // HELD_TYPES):05}.job"
            await app.timers.schedule_many(
                [TimerRequest(type=type, delay="PT0S") for _ in range(HELD_EACH)]
            )
        took: list[float] = []
        for _ in range(rounds):
            started = time.perf_counter()
            listed = await app.limits.list()
            took.append(time.perf_counter() - started)
            assert len(listed) == rules
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rules", type=int, nargs="+", default=[2000, 10000])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--database-url", default=None, help="default: a fresh SQLite file")
    args = parser.parse_args()
    print(f"duetime from {os.path.dirname(duetime.__file__)}; load {os.getloadavg()[0]:.1f}")
    for rules in args.rules:
        with tempfile.TemporaryDirectory() as tmp:
            url = args.database_url or f"sqlite:///{tmp}/bench.db"
            took = asyncio.run(measure(url, rules, args.rounds))
        print(
            f"{rules:>6} rules on {url.split(':')[0]}: median {statistics.median(took):.3f} s "
            f"(min {min(took):.3f}, max {max(took):.3f}, {len(took)} rounds)"
        )


if __name__ == "__main__":
    main()
