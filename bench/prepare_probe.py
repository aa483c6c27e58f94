"""What validating a batch costs in the client: ``AsyncApp.prepare`` of 1,000 requests.

Run by hand (not part of the test suite)::

    .venv/bin/python bench/prepare_probe.py            # 50 batches, best of 5 rounds

Every timer of ``schedule_many`` is validated by ``prepare`` (the when, the payload's JSON, the
key, the limits) before the store sees it; this times that alone, no database involved, and
prints the best round's microseconds a timer.
"""

from __future__ import annotations

import argparse
import time

from duetime import AsyncApp, TimerRequest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    app = AsyncApp("sqlite:///prepare-probe-unused.db")  # never opened: no file is made
    requests = [
        TimerRequest("bench.noop", {"due": 1_700_000_000.0 + i}, delay=0) for i in range(1000)
    ]
    rounds = []
    for _ in range(args.rounds):
        started = time.perf_counter()
        for _ in range(args.batches):
            app.timers.prepare(requests)
        rounds.append((time.perf_counter() - started) / (args.batches * len(requests)))
    print(f"prepare: {min(rounds) * 1e6:.2f} µs a timer (best of {args.rounds} rounds)")


if __name__ == "__main__":
    main()
