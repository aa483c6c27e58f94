"""The producer: ``python -m bench.chaoslib.producer ...`` schedules timers while faults run.

Every ``--tick`` seconds it stores the next batch (``--rate`` timers a second on average for
``--duration`` seconds): a tenth due at once, the rest due at random instants over the next
``--horizon`` seconds, one in twenty of those with ``expires_after`` (``--expires-after``).
Keys are ``k0000000``, ``k0000001``…, payloads ``{"n": <number>}``. A batch acknowledged
(``schedule_many`` returned) is recorded, key and due instant, durably; a batch that fails (the
database restarting) is sent again, same keys and instants (idempotent), until it goes through
or ``--give-up`` seconds pass; its keys are then recorded as in doubt.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.chaoslib.records import RecordFile, ack_line
from bench.chaoslib.worker import NAMESPACE, TYPE

from duetime import AsyncApp, TimerRequest

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def plan_batch(
    rng: random.Random, first: int, count: int, now_us: int, horizon: float, expires_after: float
) -> list[tuple[str, int, float | None]]:
    """(key, due instant in µs, expires_after or None) for ``count`` timers numbered from
    ``first``."""
    out = []
    for n in range(first, first + count):
        roll = rng.random()
        due_us = now_us if roll < 0.1 else now_us + int(rng.uniform(0.3, horizon) * 1e6)
        expires = expires_after if roll > 0.95 else None
        out.append((f"k{n:07d}", due_us, expires))
    return out


async def produce(args: argparse.Namespace) -> None:
    rng = random.Random(args.seed)
    record = RecordFile(args.records / "acks-producer.log")
    total = int(args.rate * args.duration)
    made = 0
    async with AsyncApp(args.url, NAMESPACE, max_attempts=100) as app:
        # The pace counts from here: opening the store takes seconds on a busy machine, and a
        # clock started before it made the first batch hold all of them at once.
        started = time.monotonic()
        while made < total:
            due_count = min(total, int(args.rate * (time.monotonic() - started)) + 1)
            if due_count > made:
                batch = plan_batch(
                    rng, made, due_count - made, time.time_ns() // 1000, args.horizon,
                    args.expires_after,
                )  # fmt: skip
                await store(app, record, batch, args.give_up)
                made = due_count
            await asyncio.sleep(args.tick)
    record.close()


async def store(
    app: AsyncApp, record: RecordFile, batch: list[tuple[str, int, float | None]], give_up: float
) -> None:
    requests = [
        TimerRequest(
            TYPE,
            {"n": int(key[1:])},
            at=EPOCH + timedelta(microseconds=due_us),
            key=key,
            expires_after=expires,
        )
        for key, due_us, expires in batch
    ]
    deadline = time.monotonic() + give_up
    while True:
        try:
            await app.timers.schedule_many(requests)
            acked = True
            break
        except Exception:
            if time.monotonic() > deadline:
                acked = False
                break
            await asyncio.sleep(0.2)
    lines = [ack_line(key, due, int((expires or 0) * 1e6), acked) for key, due, expires in batch]
    record.write(lines)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--records", type=Path, required=True)
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--horizon", type=float, default=8.0)
    parser.add_argument("--expires-after", type=float, default=20.0)
    parser.add_argument("--tick", type=float, default=0.1)
    parser.add_argument("--give-up", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=0)
    asyncio.run(produce(parser.parse_args()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
