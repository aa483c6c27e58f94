"""PostgreSQL failover under load: what a synchronous and an asynchronous standby lose.

    .venv/bin/python bench/failover.py --sync
    .venv/bin/python bench/failover.py --async --lag 1 --json

Two private throwaway clusters (initdb on free ports, removed afterwards): a primary and a
streaming standby made with ``pg_basebackup -R``; ``--sync`` sets the primary's
``synchronous_standby_names = '*'`` (a commit returns once the standby has it), ``--async``
leaves it empty. Worker processes and a producer run on one multi-host URL naming both servers
with ``target_session_attrs=read-write``; ``--at`` seconds into production the primary is
killed (``pg_ctl stop -m immediate``) and the standby promoted (``pg_ctl promote``); with
``--lag``, the primary's WAL senders are frozen that many seconds before (a slow link). Then the
battery's total-queue check of every acknowledged timer (bench/chaoslib/classify.py). Prints
acknowledged / lost / early / duplicated / the delivery pause (bench/README.md says how to
read it); exits 1 when a timer the producer saw acknowledged was lost or started early.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.chaoslib import ChaosConfig, Report
from bench.chaoslib.failover import failover_config, run_failover
from bench.chaoslib.render import render


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--sync", dest="sync", action="store_true", help="synchronous standby")
    mode.add_argument("--async", dest="sync", action="store_false", help="asynchronous standby")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of production")
    parser.add_argument("--at", type=float, default=None, help="failover moment (default: half)")
    parser.add_argument("--lag", type=float, default=0.0, help="replication frozen, seconds")
    parser.add_argument("--rate", type=float, default=200.0, help="timers scheduled a second")
    parser.add_argument("--horizon", type=float, default=3.0, help="timers due within, seconds")
    parser.add_argument("--lease", type=float, default=4.0, help="the workers' lease, seconds")
    parser.add_argument("--seed", type=int, default=None, help="default: random")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--keep", type=Path, help="copy the records and worker logs here")
    args = parser.parse_args()
    if args.seed is None:
        args.seed = random.randrange(2**32)
    return args


def run_on_private_clusters(config: ChaosConfig, sync: bool, at: float, lag: float) -> Report:
    from tests.integration.pg_cluster import cluster_problem, primary_and_standby

    problem = cluster_problem(standby=True)
    if problem:
        raise SystemExit(f"cannot make private PostgreSQL clusters: {problem}")
    with primary_and_standby(sync=sync) as (primary, standby):
        return run_failover(config, primary, standby, at, lag)


def main() -> int:
    args = parse_args()
    config = failover_config(
        workers=args.workers, duration=args.duration, rate=args.rate, horizon=args.horizon,
        lease=args.lease, seed=args.seed,
    )  # fmt: skip
    config.keep = args.keep
    at = args.duration / 2 if args.at is None else args.at
    started = time.monotonic()
    report = run_on_private_clusters(config, args.sync, at, args.lag)
    elapsed = time.monotonic() - started
    command = " ".join(["bench/failover.py", *sys.argv[1:]])
    if args.json:
        print(json.dumps({"command": command, "seed": args.seed, **report.to_json()}, indent=2))
    else:
        print(render(report, command, args.seed, elapsed, config.log))
    return 0 if report.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
