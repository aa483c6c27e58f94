"""PostgreSQL failover under load: the primary killed, its streaming standby promoted.

Two private clusters (pg_cluster.py): a primary and a standby made with ``pg_basebackup -R``.
Two worker processes and a producer (bench/chaoslib) run on one multi-host URL naming both,
with ``target_session_attrs=read-write``; the producer records every timer it saw
acknowledged, the workers' handlers record each start by a reference clock. One second before
the failover the primary's WAL senders are frozen (a slow link), then the primary is killed
(``pg_ctl stop -m immediate``) and the standby promoted (``pg_ctl promote``); nobody restarts
a worker. The total-queue check then reads what the promoted server holds.

- Synchronous standby (``synchronous_standby_names = '*'``): every acknowledged timer is
  delivered, none early; reruns (a claim the new primary never saw) are allowed.
- Asynchronous standby: what the primary acknowledged while the standby was behind is gone —
  the same check counts it lost (and shows that the check can see a loss). The failover waits
  until the primary has acknowledged a batch after the freeze, however slow a busy machine
  makes the producer.

Needs the PostgreSQL server binaries (``DUETIME_TEST_PG_BIN``); skipped without them, failed
when ``CI`` is set.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator

import pytest
from bench.chaoslib import Report
from bench.chaoslib.failover import failover_config, run_failover
from pg_cluster import PgCluster, cluster_problem, primary_and_standby

pytestmark = pytest.mark.slow

DURATION = 6.0
FAILOVER_AT = 3.0
LAG = 1.0


def clusters(sync: bool) -> Iterator[tuple[PgCluster, PgCluster]]:
    problem = cluster_problem(standby=True)
    if problem is not None:
        message = f"cannot run private PostgreSQL clusters: {problem}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    with primary_and_standby(sync=sync) as pair:
        yield pair


@pytest.fixture
def sync_pair() -> Iterator[tuple[PgCluster, PgCluster]]:
    yield from clusters(sync=True)


@pytest.fixture
def async_pair() -> Iterator[tuple[PgCluster, PgCluster]]:
    yield from clusters(sync=False)


def failover(pair: tuple[PgCluster, PgCluster], run_ahead: bool = False) -> Report:
    seed = random.randrange(2**32)
    config = failover_config(duration=DURATION, rate=200.0, seed=seed)
    report = run_failover(config, *pair, at=FAILOVER_AT, lag=LAG, run_ahead=run_ahead)
    print(
        f"seed {seed}: acknowledged {report.acknowledged}, in doubt {report.in_doubt}, "
        f"lost {report.lost}, early {report.early}, duplicated {report.duplicated} "
        f"(reclaimed {report.reclaimed}), delivery paused {report.pause_ms / 1000:.2f} s, "
        f"lateness max {report.lateness_ms.get('max', 0) / 1000:.2f} s; {config.log[0]}"
    )
    assert report.faults == {"lag": 1, "failover": 1}, report.faults
    return report


def summary(report: Report) -> str:
    return f"{report.problems()} examples={report.examples}"


def test_a_synchronous_standby_delivers_every_acknowledged_timer(
    sync_pair: tuple[PgCluster, PgCluster],
) -> None:
    report = failover(sync_pair)

    assert report.acknowledged >= 0.9 * DURATION * 200, summary(report)
    assert report.lost == 0, summary(report)
    assert report.early == 0, summary(report)
    assert report.unexpected == 0, summary(report)
    assert report.overwritten == 0, summary(report)
    assert report.unfinished == 0, summary(report)
    assert report.ran == report.acknowledged, summary(report)


def test_an_asynchronous_standby_loses_what_it_had_not_received(
    async_pair: tuple[PgCluster, PgCluster],
) -> None:
    report = failover(async_pair, run_ahead=True)

    assert report.lost > 0, "the primary acknowledged timers its standby never got: some is lost"
    # What the standby had received before its link was cut survives the promotion.
    assert report.lost < report.acknowledged, summary(report)
    assert report.early == 0, summary(report)
    assert report.unexpected == 0, summary(report)
