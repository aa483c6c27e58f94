"""duetime on a Patroni cluster: the leader killed, or switched over, under load.

One etcd and three PostgreSQL servers managed by Patroni with ``synchronous_mode``
(patroni_cluster.py), two worker processes and a producer scheduling timers (bench/chaoslib) on one
multi-host URL with ``target_session_attrs=read-write`` and ``durable_claims=true``. Once timers
flow, the leader's postmaster is killed (``kill -9``; Patroni fails over to the synchronous
standby), or Patroni is asked for a switchover; nobody restarts or reconfigures a worker. Then the
total-queue check of every acknowledged timer.

Promised for both: no acknowledged timer lost, none started early, no attempt number started twice,
every one finished, and none later than the failover time plus the lease (a lease that the dead
server held runs out, then its timer is rescued) plus :data:`CATCH_UP` for the backlog; the
switchover runs nothing twice.

Needs Debian's ``patroni`` and ``etcd-server`` and the PostgreSQL server binaries; skipped
without them (the reason shown), failed when ``CI`` is set.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator

import pytest
from bench.chaoslib import Report
from bench.chaoslib.failover import failover_config
from bench.chaoslib.patroni import Measured, run_patroni
from patroni_cluster import PatroniCluster, patroni, patroni_problem

pytestmark = pytest.mark.slow

DURATION = 8.0
AT = 3.0
RATE = 300.0
LEASE = 4.0
CATCH_UP = 3.0
"""Seconds to work off what fell due during the outage, on top of the failover and the lease."""


@pytest.fixture
def cluster() -> Iterator[PatroniCluster]:
    problem = patroni_problem()
    if problem is not None:
        message = f"cannot run a Patroni cluster: {problem}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    with patroni() as started:
        yield started


def under_load(cluster: PatroniCluster, kind: str) -> tuple[Report, Measured]:
    seed = random.randrange(2**32)
    config = failover_config(duration=DURATION, rate=RATE, lease=LEASE, seed=seed)
    report, measured = run_patroni(config, cluster, kind, at=AT)
    print(
        f"{kind}, seed {seed}: {measured.leaders}, new leader took writes "
        f"{measured.seconds[0] if measured.seconds else -1:.2f} s after the fault; "
        f"acknowledged {report.acknowledged}, in doubt {report.in_doubt}, lost {report.lost}, "
        f"early {report.early}, duplicated {report.duplicated} (same attempt {report.reclaimed}), "
        f"delivery paused {report.pause_ms / 1000:.2f} s, lateness {report.lateness_ms}; "
        f"{config.log[:-1]}"
    )
    assert report.faults == {"failover": 1}, report.faults
    assert len(measured.seconds) == 1, measured
    return report, measured


def check(report: Report, measured: Measured) -> None:
    summary = f"{report.problems()} examples={report.examples}"
    assert report.acknowledged >= 0.5 * DURATION * RATE, summary
    assert report.ok, summary  # nothing lost, early, overwritten, stale or out of order
    assert report.unfinished == 0, summary
    assert report.ran == report.acknowledged, summary
    bound_ms = (measured.seconds[0] + LEASE + CATCH_UP) * 1000
    assert report.lateness_ms["max"] <= bound_ms, (report.lateness_ms, bound_ms)


def test_killing_the_leader_loses_nothing(cluster: PatroniCluster) -> None:
    """With ``durable_claims=true`` a claim returns once the synchronous standby has it, so the
    promoted server never hands out again an attempt a handler began (``reclaimed``; without
    it, the claims of the last milliseconds before the kill are forgotten: about ten a run)."""
    report, measured = under_load(cluster, "kill")
    check(report, measured)
    assert report.reclaimed == 0, report.examples


def test_a_switchover_loses_and_doubles_nothing(cluster: PatroniCluster) -> None:
    """A switchover stops the old primary cleanly: its WAL senders send everything first, so
    no claim is forgotten and no lease runs out: nothing runs twice."""
    report, measured = under_load(cluster, "switchover")
    check(report, measured)
    assert report.reclaimed == 0, report.examples
    assert report.duplicated == 0, report.duplicate_causes
