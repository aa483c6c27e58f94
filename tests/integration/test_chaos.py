"""Short runs of the chaos battery (bench/chaos.py): real worker processes, a producer, faults,
then the total-queue check of every acknowledged timer (``bench.chaoslib.classify``).

- kill -9 on SQLite: workers killed mid-batch and restarted while the producer schedules;
  nothing lost, nothing unexpected, no attempt overwritten, nothing started early.
- clock skew on PostgreSQL (its own schema of ``DUETIME_TEST_PG``): one worker under
  libfaketime 120 s ahead, one 120 s behind, handlers that outlast the lease: the database's
  clock decides, so nothing starts early, nothing expires while its window is open, and no
  attempt is taken from a live worker.

Both need the ``faketime`` command for the skew (Debian's ``faketime``): without it the skew
test is skipped, or failed when ``CI`` is set (./test installs it there).
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import pytest
from bench.chaoslib import ChaosConfig, Report, run, run_skew_scenario
from bench.chaoslib.faults import faketime_problem

# The PostgreSQL probe lives beside the store tests; pytest does not put it on sys.path.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from storekit import pooled_schema, require_pg, with_params

pytestmark = pytest.mark.slow


def summary(report: Report) -> str:
    return f"{report.problems()} examples={report.examples} faults={report.faults}"


def test_kill_9_mid_batch_on_sqlite_loses_nothing(tmp_path: Path) -> None:
    seed = random.randrange(2**32)
    print(f"seed {seed}")
    config = ChaosConfig(
        workers=2,
        duration=5.0,
        rate=200.0,
        faults=frozenset({"kill"}),
        fault_every=0.8,
        seed=seed,
        lease=2.0,
        handler_seconds=0.005,
        horizon=3.0,
        drain_timeout=60.0,
    )
    report = run(config, f"sqlite:///{tmp_path / 'chaos.db'}")

    assert report.faults.get("kill", 0) >= 1, "no worker was killed: nothing was tested"
    assert report.acknowledged == 1000, summary(report)
    assert report.lost == 0, summary(report)
    assert report.unexpected == 0, summary(report)
    assert report.overwritten == 0, summary(report)
    assert report.unfinished == 0, summary(report)
    assert report.ran + report.expired == report.acknowledged, summary(report)
    assert report.early == 0, summary(report)


def test_skewed_workers_start_nothing_early_and_lose_nothing() -> None:
    url = require_pg()
    problem = faketime_problem()
    if problem:
        if os.environ.get("CI"):
            pytest.fail(problem)
        pytest.skip(problem)
    with pooled_schema() as schema:
        report = run_skew_scenario(
            with_params(url, schema=schema), skews=[120.0, -120.0], timers=300, lease=2.0
        )

    assert report.acknowledged == 300, summary(report)
    assert report.early == 0, summary(report)
    assert report.lost == 0, summary(report)
    assert report.unexpected == 0, summary(report)
    assert report.overwritten == 0, summary(report)
