"""Worker processes with different handlers on one PostgreSQL schema (a pgmq bus's weakness: its
heterogeneous nodes dead-letter each other's events). Here each node claims only the types it
subscribes to, so neither touches the other's events; an event no live node subscribes to is
dead-lettered, with the reason, once it is overdue by the grace.

The grace is long (what waits for a node that is still starting must outlast a busy machine's
start of that process); the event that must be dead-lettered is due that long ago already, and
one due now must still wait at the end. The lease is the default one: a lease of seconds lapses
on a busy machine while a handler runs (a heartbeat starved of CPU), and the event runs twice.

Workers are real ``duetime worker --app bus_apps:<name>`` processes (``bus_apps.py``); each
appends one line per delivery to a shared log. Skipped without PostgreSQL, failed under CI.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from tests.waiting import wait_until

from duetime import App, Status, TimerRequest

# The PostgreSQL probe lives beside the store tests; pytest does not put it on sys.path.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from storekit import pooled_pg_url

pytestmark = pytest.mark.slow  # worker processes with different handlers

HERE = Path(__file__).resolve().parent
DUETIME = str(Path(sys.executable).parent / "duetime")
EVENTS = 300
GRACE = 600.0
"""Seconds: longer than the test may run (its timeout), so that nothing a node serves is
dead-lettered while that node starts or works through its backlog."""


@pytest.fixture
def pg_url() -> Iterator[str]:
    with pooled_pg_url() as found:
        yield found


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    try:
        yield started
    finally:
        for proc in started:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def log_lines(log: Path) -> list[list[str]]:
    if not log.exists():
        return []
    return [line.split(",") for line in log.read_text().splitlines()]


@pytest.mark.timeout(GRACE)
def test_worker_processes_with_different_handlers_share_a_schema(
    pg_url: str, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    log = tmp_path / "deliveries.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUETIME_")}
    env.update(
        DUETIME_DATABASE_URL=pg_url,
        DUETIME_RESCUE_INTERVAL="0.2",
        DUETIME_NO_SUBSCRIBER_GRACE=str(GRACE),
        BUS_LOG=str(log),
    )

    def start(name: str) -> subprocess.Popen[bytes]:
        stderr = (tmp_path / f"{name}.stderr").open("wb")
        proc = subprocess.Popen(
            [DUETIME, "worker", "--app", f"bus_apps:{name}"], cwd=HERE, env=env, stderr=stderr
        )
        stderr.close()
        procs.append(proc)
        return proc

    with App(pg_url, producer="test") as app:
        alpha = start("alpha")
        wait_until(lambda: len(app.nodes()) == 1, 120, "the alpha worker")

        # Only alpha runs: beta's events wait for a beta node, they are not alpha's to take.
        early_events = [
            TimerRequest("beta", {"i": i}, delay=0, key=f"b-early-{i}") for i in range(EVENTS)
        ]
        app.timers.schedule_many(early_events, on_conflict="keep")
        # No node will ever subscribe to gamma: g-1 is overdue by the grace already, g-0 not.
        overdue = datetime.now(UTC) - timedelta(seconds=GRACE + 1)
        gamma = app.schedule("gamma", {}, at=overdue, key="g-1", on_conflict="keep")
        app.emit("gamma", {}, key="g-0")
        app.emit("alpha", {}, key="a-probe")  # due after them all
        wait_until(lambda: ["alpha", "a-probe"] in [x[:2] for x in log_lines(log)], 120, "probe")
        early = app.timers.history(type="beta", limit=1000).items
        assert {t.status for t in early} == {Status.SCHEDULED}

        beta = start("beta")
        wait_until(lambda: len(app.nodes()) == 2, 120, "the beta worker")
        for i in range(EVENTS):
            app.emit("alpha", {"i": i}, key=f"a-{i}")
            app.emit("beta", {"i": i}, key=f"b-{i}")

        def finished() -> bool:
            counts = app.timers.counts()
            return counts[Status.DONE] == 3 * EVENTS + 1 and counts[Status.DEAD] == 1

        wait_until(
            finished,
            GRACE / 2,  # a bound for workers that stopped, not a guess at their pace
            "every event handled and gamma dead-lettered",
            explain=lambda: f"counts: {app.timers.counts()}",
        )
        subscriptions = {n.pid: [s.to_dict() for s in n.subscriptions] for n in app.nodes()}
        assert subscriptions == {
            alpha.pid: [{"namespace": "default", "type": "alpha", "to": ["handler"]}],
            beta.pid: [{"namespace": "default", "type": "beta", "to": ["handler"]}],
        }
        dead = app.get("g-1")
        assert dead.last_error == "no subscriber for type gamma"
        assert dead.completed_at is not None
        assert dead.completed_at - gamma.timer.due_at >= timedelta(seconds=GRACE)
        assert [t.key for t in app.timers.dead().items] == ["g-1"]
        assert app.get("g-0").status is Status.SCHEDULED  # not yet overdue by the grace
        assert app.timers.counts()[Status.SCHEDULED] == 1

    for proc in (alpha, beta):
        proc.send_signal(signal.SIGTERM)
    for proc in (alpha, beta):
        assert proc.wait(timeout=120) == 0
    lines = log_lines(log)
    by_type: dict[str, set[str]] = {"alpha": set(), "beta": set()}
    for type, key, attempt, pid in lines:
        assert attempt == "1", (type, key)  # nothing was dead-lettered or retried
        assert int(pid) == (alpha.pid if type == "alpha" else beta.pid), (type, key)
        by_type[type].add(key)
    assert len(lines) == 3 * EVENTS + 1  # each event delivered once
    assert by_type["alpha"] == {f"a-{i}" for i in range(EVENTS)} | {"a-probe"}
    assert by_type["beta"] == {f"b-{i}" for i in range(EVENTS)} | {
        f"b-early-{i}" for i in range(EVENTS)
    }
