"""Where the client's CPU goes when duetime schedules a batch: run it, then sort a profile.

Run by hand (not part of the test suite)::

    # the enqueue of pg_bench.py's mass scenario, alone, under a sampling profiler
    py-spy record -r 250 -f raw -o /tmp/enqueue.txt -- \\
        .venv-bench/bin/python bench/enqueue_profile.py run -n 200000
    # the samples inside the enqueue, by where they were, in µs a timer
    .venv-bench/bin/python bench/enqueue_profile.py sort /tmp/enqueue.txt --us 28.8

``run`` schedules ``-n`` keyless timers due in an hour with ``bench/peers/duetime_peer.py``'s
enqueue (``schedule_many``, batches of 1,000) into a fresh database ``dtb_enqueue_profile`` and
prints the rate and this process's CPU a timer (``getrusage``, connecting and opening
included). ``sort`` reads py-spy's raw (collapsed) output, keeps the samples inside that
enqueue and puts each in the first matching group below; ``--us`` (the client CPU a timer
``run`` printed) turns the shares into µs a timer. A sampler counts a thread waiting for a CPU
as running, so on a loaded machine the shares are fairer than the sample counts. Put an older
checkout first on ``PYTHONPATH`` to profile its code (``bench/README.md``, "Enqueue: where the
client's CPU went").
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

GROUPS: list[tuple[str, Callable[[str], bool]]] = [
    (
        "the caller's own loop: TimerRequest objects",
        lambda s: "Duetime.enqueue" in s and "schedule_many" not in s,
    ),
    ("the payload: JSON text, checks, read back (encode_payload)", lambda s: "encode_payload" in s),
    (
        "the rest of validation: the when, the fields, NewTimer",
        lambda s: "TimerRequest.resolve" in s,
    ),
    ("keys drawn", lambda s: "draw_keys" in s),
    ("NUL check of the text columns", lambda s: "check_text" in s),
    (
        "statement parameters: the arrays built and dumped",
        lambda s: "timer_batch_params" in s or "_convert_query" in s,
    ),
    ("the answers: rows decoded, Timers made", lambda s: "fetchall" in s or "Batch.take" in s),
    (
        "libpq: statements sent, results received",
        lambda s: any(f in s for f in ("_communicate_gen", "_fetch_gen", "AsyncPipeline.sync")),
    ),
    ("the rest of psycopg's execute", lambda s: "AsyncCursor.execute" in s),
    ("the results: PutResults, chunking, the rounds of keys", lambda s: "write_timers" in s),
    ("transaction, pool, facade, event loop", lambda s: True),
]


def run(base: str, n: int) -> None:
    import psycopg

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from peers.duetime_peer import Duetime

    db = "dtb_enqueue_profile"

    def admin(sql: str) -> None:
        with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
            conn.execute(sql)

    admin(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
    admin(f"CREATE DATABASE {db}")
    try:
        system = Duetime(base)
        asyncio.run(system.install(db))
        due = time.time() + 3600
        before = resource.getrusage(resource.RUSAGE_SELF)
        started = time.perf_counter()
        asyncio.run(system.enqueue(db, [due] * n))
        seconds = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_SELF)
    finally:
        admin(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    print(f"{n:,} timers: {n / seconds:,.0f}/s, client CPU {cpu / n * 1e6:.1f} µs a timer")


def sort(path: Path, us: float | None) -> None:
    counts: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if "Duetime.enqueue" not in stack:
            continue
        total += int(count)
        counts[next(name for name, inside in GROUPS if inside(stack))] += int(count)
    if not total:
        sys.exit(f"no samples inside Duetime.enqueue in {path}")
    print(f"| where | share | {'µs a timer' if us else ''} |\n|---|---:|---:|")
    for name, _ in GROUPS:
        share = counts[name] / total
        print(f"| {name} | {share:.0%} | {f'{share * us:.1f} µs' if us else ''} |")
    print(f"({total:,} samples)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    running = commands.add_parser("run", help="schedule -n timers as pg_bench.py does")
    running.add_argument("--base", default="postgresql://postgres@127.0.0.1:5432")
    running.add_argument("-n", type=int, default=200_000)
    sorting = commands.add_parser("sort", help="group a py-spy raw profile of `run`")
    sorting.add_argument("path", type=Path)
    sorting.add_argument("--us", type=float, help="the client CPU a timer `run` printed")
    args = parser.parse_args()
    if args.command == "run":
        run(args.base, args.n)
    else:
        sort(args.path, args.us)


if __name__ == "__main__":
    main()
