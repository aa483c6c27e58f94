"""How closely 3 worker processes keep a global rate limit: handler starts per window.

Run by hand (not part of the test suite)::

    .venv/bin/python bench/flow_bench.py                         # PostgreSQL, 1000/s, 10,000
    .venv/bin/python bench/flow_bench.py --database sqlite --timers 5000 --rate 1000/s

A limit ``--rate`` (default burst) is set on the type ``flow.job``; ``--workers`` processes
(default 3) start, then ``--timers`` timers due a minute ago are stored at once. Each handler
appends its start time to a shared log (one ``write`` to an ``O_APPEND`` file). Reported: the
achieved rate, and for windows of 10 ms to 2 s the most starts any window held against the
limit's bound ``rate * window + burst``. PostgreSQL runs in a schema of its own (``--base``,
default ``postgresql://postgres@127.0.0.1:5432/postgres``), dropped afterwards.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from bisect import bisect_left
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg

from duetime import App, AsyncApp, Event, Status, TimerRequest
from duetime.app.runner import run_process

JOB = "flow.job"
WINDOWS = (0.01, 0.1, 0.5, 1.0, 2.0)


def child(url: str, log: str) -> None:
    app = AsyncApp(url, concurrency=100)
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    @app.handler(JOB)
    async def job(event: Event) -> None:
        os.write(fd, f"{time.time():.6f}\n".encode())

    run_process(app)


def most_in(starts: list[float], window: float) -> int:
    return max(bisect_left(starts, at + window) - i for i, at in enumerate(starts))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--database", choices=("postgres", "sqlite"), default="postgres")
    parser.add_argument("--base", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--rate", default="1000/s")
    parser.add_argument("--burst", type=int)
    parser.add_argument("--timers", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    with tempfile.TemporaryDirectory(prefix="duetime-flow-") as tmp:
        schema = f"flow_{uuid.uuid4().hex[:12]}"
        url = (
            f"{args.base}?schema={schema}"
            if args.database == "postgres"
            else f"sqlite:///{Path(tmp) / 'duetime.db'}"
        )
        log = str(Path(tmp) / "starts.log")
        procs: list[subprocess.Popen[bytes]] = []
        try:
            with App(url) as app:
                rule = app.limits.set(JOB, rate=args.rate, burst=args.burst)
            print(f"$ {' '.join(sys.argv)}")
            print(f"load average at start: {os.getloadavg()[0]:.2f}; {args.database}")
            print(f"limit: rate {rule.rate}, burst {rule.effective_burst}; {args.workers} workers")
            for _ in range(args.workers):
                procs.append(subprocess.Popen([sys.executable, __file__, "--child", url, log]))
            time.sleep(3)  # started, rules read
            first = datetime.now(UTC) - timedelta(minutes=1)
            with App(url) as app:
                for start in range(0, args.timers, 1000):
                    app.timers.schedule_many(
                        [
                            TimerRequest(JOB, {}, at=first + timedelta(microseconds=i))
                            for i in range(start, min(start + 1000, args.timers))
                        ]
                    )
                deadline = time.monotonic() + 600
                while app.timers.counts().get(Status.DONE, 0) < args.timers:
                    if time.monotonic() > deadline:
                        raise SystemExit("not all done within 10 min")
                    time.sleep(0.5)
        finally:
            for proc in procs:
                proc.send_signal(signal.SIGTERM)
            for proc in procs:
                proc.wait(timeout=60)
            if args.database == "postgres":
                with psycopg.connect(args.base, autocommit=True) as conn:
                    conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        starts = sorted(float(line) for line in Path(log).read_text().split())
        assert rule.rate is not None
        per_second = rule.rate.count / rule.rate.period.total_seconds()
        spent = starts[-1] - starts[0]
        print(f"{len(starts)} starts in {spent:.2f} s: {(len(starts) - 1) / spent:,.0f}/s")
        print("| window | most starts | bound rate*window+burst | over |")
        print("|---:|---:|---:|---:|")
        for window in WINDOWS:
            most = most_in(starts, window)
            bound = per_second * window + rule.effective_burst
            print(f"| {window * 1000:g} ms | {most} | {bound:g} | {max(0, most - bound):g} |")
        print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
