"""The chaos battery: N workers under kill -9, SIGSTOP, database restarts, dropped connections
and clock skew while a producer schedules; then a total-queue check of every acknowledged timer.

    .venv/bin/python bench/chaos.py --store sqlite --workers 3 --duration 60 --faults kill,stop
    .venv/bin/python bench/chaos.py --store postgres --workers 4 --duration 120 \\
        --faults kill,stop,dbrestart,dropconn,skew --json
    .venv/bin/python bench/chaos.py --store postgres --workers 4 --duration 120 \\
        --faults kill,stop,dbrestart,dropconn,skew,raise --sync-handlers

PostgreSQL runs on a private throwaway cluster (initdb on a free port, removed afterwards), so
restarting it harms no one; SQLite on a file in a temporary folder. Prints a table (or JSON)
and exits 1 when a timer was lost, started early, unexpected, an attempt was overwritten,
started after it was recorded lost (a stale start) or recorded with its instants out of order
(claimed after it started, or started after it finished), or a worker ended by itself.
See bench/README.md for what each fault does and how to read the output.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.chaoslib import ChaosConfig, Report, run
from bench.chaoslib.faults import EVENT_FAULTS
from bench.chaoslib.render import render

ALL_FAULTS = (*EVENT_FAULTS, "skew", "raise")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of production")
    parser.add_argument("--rate", type=float, default=200.0, help="timers scheduled a second")
    parser.add_argument("--faults", default="kill,stop", help=f"any of {','.join(ALL_FAULTS)}")
    parser.add_argument("--skew", type=float, default=120.0, help="seconds, for the skew fault")
    parser.add_argument("--seed", type=int, default=None, help="default: the time")
    parser.add_argument("--lease", type=float, default=4.0, help="the workers' lease, seconds")
    parser.add_argument("--fault-every", type=float, default=2.0, help="mean seconds between")
    parser.add_argument("--handler-seconds", type=float, default=0.01)
    parser.add_argument(
        "--sync-handlers", action="store_true", help="plain def handlers, run in threads"
    )
    parser.add_argument("--concurrency", type=int, default=50, help="each worker's")
    parser.add_argument(
        "--raise-every", type=int, default=50, help="the raise fault: every N-th timer's"
    )
    parser.add_argument("--horizon", type=float, default=8.0, help="timers due within, seconds")
    parser.add_argument("--drain-timeout", type=float, default=180.0)
    parser.add_argument("--keep", type=Path, help="copy the records and worker logs here")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--deadlines",
        action="store_true",
        help="instead: schedules with deadlines under failing handlers and a stopped worker; "
        "every miss must raise exactly one event, no occurrence done in time one",
    )
    parser.add_argument(
        "--pg",
        default="postgresql://postgres@127.0.0.1:5432/test",
        help="with --deadlines --store postgres: the database (a schema of its own is made)",
    )
    args = parser.parse_args()
    faults = {f.strip() for f in args.faults.split(",") if f.strip()}
    unknown = faults - set(ALL_FAULTS)
    if unknown:
        parser.error(f"--faults: unknown {', '.join(sorted(unknown))}")
    if "skew" in faults and args.store == "sqlite":
        # A SQLite database is a file on one machine: every process reads that machine's clock,
        # which is the database's. libfaketime would fake a per-process skew that cannot happen
        # (and a machine whose clock is wrong is a wrong database clock, which no process can
        # see). Skew is a PostgreSQL fault.
        parser.error("--faults: skew applies to PostgreSQL only (SQLite has one machine's clock)")
    args.faults = frozenset(faults)
    if args.seed is None:
        args.seed = int(time.time())
    return args


def main() -> int:
    args = parse_args()
    if args.deadlines:
        return deadlines_main(args)
    config = ChaosConfig(
        workers=args.workers,
        duration=args.duration,
        rate=args.rate,
        faults=args.faults,
        skew=args.skew,
        seed=args.seed,
        lease=args.lease,
        handler_seconds=args.handler_seconds,
        sync_handlers=args.sync_handlers,
        concurrency=args.concurrency,
        raise_every=args.raise_every,
        horizon=args.horizon,
        fault_every=args.fault_every,
        drain_timeout=args.drain_timeout,
        keep=args.keep,
    )
    started = time.monotonic()
    if args.store == "postgres":
        report = run_on_private_cluster(config)
    else:
        with tempfile.TemporaryDirectory(prefix="duetime-chaos-db-") as folder:
            report = run(config, f"sqlite:///{folder}/chaos.db")
    elapsed = time.monotonic() - started
    command = " ".join(["bench/chaos.py", *sys.argv[1:]])
    if args.json:
        print(json.dumps({"command": command, "seed": args.seed, **report.to_json()}, indent=2))
    else:
        print(render(report, command, args.seed, elapsed, config.log))
    return 0 if report.ok else 1


def deadlines_main(args: argparse.Namespace) -> int:
    """``--deadlines``: the deadline check on one store; its report, and 1 on a problem."""
    import asyncio
    import uuid

    from bench.chaoslib.deadlines import DeadlineChaos, run_deadline_chaos

    config = DeadlineChaos(seconds=max(args.duration, 25.0), workers=args.workers)
    started = time.monotonic()
    if args.store == "postgres":
        schema = f"chaos_deadlines_{uuid.uuid4().hex[:8]}"
        try:
            report = asyncio.run(run_deadline_chaos(f"{args.pg}?schema={schema}", config))
        finally:
            import psycopg

            with psycopg.connect(args.pg, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    else:
        with tempfile.TemporaryDirectory(prefix="duetime-chaos-db-") as folder:
            report = asyncio.run(run_deadline_chaos(f"sqlite:///{folder}/chaos.db", config))
    result = {
        "command": " ".join(["bench/chaos.py", *sys.argv[1:]]),
        "store": args.store,
        "seconds": round(time.monotonic() - started, 1),
        **report.to_json(),
    }
    print(json.dumps(result, indent=None if args.json else 2))
    return 0 if report.ok else 1


def run_on_private_cluster(config: ChaosConfig) -> Report:
    from tests.integration.pg_cluster import PgCluster, cluster_problem

    problem = cluster_problem()
    if problem:
        raise SystemExit(f"cannot make a private PostgreSQL cluster: {problem}")
    cluster = PgCluster.create()
    try:
        cluster.start()
        return run(config, cluster.url(schema="chaos"), cluster)
    finally:
        cluster.remove()


if __name__ == "__main__":
    raise SystemExit(main())
