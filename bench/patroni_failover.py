"""duetime on a Patroni cluster: the leader killed or switched over under load, what it costs.

    .venv/bin/python bench/patroni_failover.py --fault kill
    .venv/bin/python bench/patroni_failover.py --fault switchover --rate 300 --json

A private cluster (tests/integration/patroni_cluster.py: one etcd, three PostgreSQL servers managed
by Patroni with ``synchronous_mode``, on free loopback ports, removed afterwards). Worker processes
and a producer run on the cluster's multi-host URL (``target_session_attrs=read-write``,
``durable_claims=true`` unless ``--async-claims``); once timers flow, ``--at`` seconds into
production or later, the leader's postmaster is killed (``kill -9``: Patroni fails over to the
synchronous standby) or Patroni is asked for a switchover (``POST /switchover``). Prints the
failover time (the fault to the new leader committing a write through the URL), then the battery's
check of every acknowledged timer: lost / early / duplicated (``reclaimed``: the same attempt
number started twice) / lateness / the delivery pause. Needs Debian's ``patroni`` and
``etcd-server``.
Exits 1 when a timer the producer saw acknowledged was lost or started early.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))

from bench.chaoslib.failover import failover_config
from bench.chaoslib.patroni import FAULTS, run_patroni
from bench.chaoslib.render import render


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fault", choices=FAULTS, required=True)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--duration", type=float, default=8.0, help="seconds of production")
    parser.add_argument("--at", type=float, default=3.0, help="fault moment, at the earliest")
    parser.add_argument("--rate", type=float, default=300.0, help="timers scheduled a second")
    parser.add_argument("--horizon", type=float, default=3.0, help="timers due within, seconds")
    parser.add_argument("--lease", type=float, default=4.0, help="the workers' lease, seconds")
    parser.add_argument(
        "--async-claims",
        action="store_true",
        help="claims commit without waiting (no durable_claims): a kill may rerun attempts",
    )
    parser.add_argument("--seed", type=int, default=None, help="default: random")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--keep", type=Path, help="copy the records and worker logs here")
    args = parser.parse_args()
    if args.seed is None:
        args.seed = random.randrange(2**32)
    return args


def main() -> int:
    from patroni_cluster import patroni, patroni_problem

    args = parse_args()
    if problem := patroni_problem():
        raise SystemExit(f"cannot run a Patroni cluster: {problem}")
    config = failover_config(
        workers=args.workers, duration=args.duration, rate=args.rate, horizon=args.horizon,
        lease=args.lease, seed=args.seed,
    )  # fmt: skip
    config.keep = args.keep
    started = time.monotonic()
    with patroni() as cluster:
        report, measured = run_patroni(
            config, cluster, args.fault, args.at, durable_claims=not args.async_claims
        )
    elapsed = time.monotonic() - started
    command = " ".join(["bench/patroni_failover.py", *sys.argv[1:]])
    failover = {"seconds": [round(s, 2) for s in measured.seconds], "leaders": measured.leaders}
    if args.json:
        figures = {"command": command, "seed": args.seed, "failover": failover}
        print(json.dumps({**figures, **report.to_json()}, indent=2))
    else:
        print(f"failover: {failover}")
        print(render(report, command, args.seed, elapsed, config.log))
    return 0 if report.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
