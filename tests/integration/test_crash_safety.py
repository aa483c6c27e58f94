"""Crash safety with real processes: kill -9 a worker mid-run, restart it, lose nothing.

The worker runs in a subprocess (``crash_worker_app.py``) whose handler appends one line per
delivery to a log file, so the log is the receiver's view of what was delivered, independent of
the database. After several SIGKILLs at random moments every timer must be ``done``; a key may be
delivered twice only if it was in flight at a kill — its first attempt is then recorded ``lost``
(the restarted worker rescues the dead process's leases at start) — and there can be at most
``concurrency + batch_size`` such keys per kill (handlers running, and outcomes not yet
written: a worker never has more started timers unrecorded). SIGTERM instead finishes the work
in flight and exits 0.
"""

from __future__ import annotations

import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from tests.waiting import wait_until

from duetime import App, Outcome, Status, TimerRequest

pytestmark = pytest.mark.slow  # worker processes killed and stopped mid-run

APP = Path(__file__).with_name("crash_worker_app.py")
WORK = "work"


@dataclass(frozen=True)
class Delivery:
    what: str  # "start" or "end"
    key: str
    attempt: int
    pid: int
    at: float


def read_log(path: Path) -> list[Delivery]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        what, key, attempt, pid, at = line.split(",")
        out.append(Delivery(what, key, int(attempt), int(pid), float(at)))
    return out


def count_starts(path: Path) -> int:
    if not path.exists():
        return 0
    with path.open("rb") as f:
        return sum(1 for line in f if line.startswith(b"start,"))


class Workers:
    """Worker subprocesses of one test; every one still running is killed at the end."""

    def __init__(self, tmp_path: Path, db_url: str, log: Path) -> None:
        self.tmp_path = tmp_path
        self.db_url = db_url
        self.log = log
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, *options: str) -> subprocess.Popen[bytes]:
        stderr = (self.tmp_path / f"worker-{len(self.procs)}.stderr").open("wb")
        cmd = [sys.executable, str(APP), "worker", "--db", self.db_url, "--log", str(self.log)]
        proc = subprocess.Popen([*cmd, *options], stdout=subprocess.DEVNULL, stderr=stderr)
        stderr.close()
        self.procs.append(proc)
        return proc

    def stderr(self) -> str:
        parts = []
        for i, proc in enumerate(self.procs):
            text = (self.tmp_path / f"worker-{i}.stderr").read_text(errors="replace")
            parts.append(f"--- worker {i} (pid {proc.pid}, rc {proc.returncode}) ---\n{text}")
        return "\n".join(parts)

    def cleanup(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.fixture
def workers(tmp_path: Path, db_url: str) -> Iterator[Workers]:
    w = Workers(tmp_path, db_url, tmp_path / "deliveries.log")
    try:
        yield w
    finally:
        w.cleanup()


def db_path(db_url: str) -> str:
    return db_url[len("sqlite:///") :]


def status_counts(db_url: str) -> Counter[str]:
    conn = sqlite3.connect(db_path(db_url))
    try:
        return Counter(dict(conn.execute("SELECT status, count(*) FROM timers GROUP BY status")))
    finally:
        conn.close()


def schedule(app: App, count: int, start_in: float, spread: float) -> list[str]:
    first = datetime.now(UTC) + timedelta(seconds=start_in)
    keys = [f"t-{i:05d}" for i in range(count)]
    for start in range(0, count, 1000):
        app.timers.schedule_many(
            [
                TimerRequest(
                    WORK, {"i": i}, at=first + timedelta(seconds=spread * i / count), key=k
                )
                for i, k in enumerate(keys[start : start + 1000], start)
            ]
        )
    return keys


TIMERS = 5_000
KILLS = 3
CONCURRENCY = 20
BATCH = 50


def test_kill_9_mid_run_loses_nothing_and_redelivers_only_work_in_flight(
    tmp_path: Path, db_url: str, workers: Workers
) -> None:
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    print(f"random seed {seed}")
    options = (
        *("--concurrency", str(CONCURRENCY), "--batch-size", str(BATCH)),
        *("--delay", "0.002", "--lease", "2"),
    )
    with App(db_url) as app:
        keys = schedule(app, TIMERS, start_in=1.0, spread=3.0)

        proc = workers.start(*options)
        killed: set[int] = set()
        # Kill when this many deliveries have been logged: random moments while work remains.
        for threshold in sorted(rng.sample(range(300, TIMERS - 800), KILLS)):
            wait_until(lambda t=threshold: count_starts(workers.log) >= t, 60, "deliveries")
            time.sleep(rng.uniform(0, 0.03))
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            killed.add(proc.pid)
            left = TIMERS - status_counts(db_url)[Status.DONE.value]
            assert left > 0, "the kill came too late to test anything"
            proc = workers.start(*options)

        wait_until(
            lambda: status_counts(db_url)[Status.DONE.value] == TIMERS, 60, "all timers done"
        )
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0, workers.stderr()

        # Every timer is done, none lost, nothing left running or pending.
        assert status_counts(db_url) == Counter({Status.DONE.value: TIMERS})
        starts = [d for d in read_log(workers.log) if d.what == "start"]
        delivered = Counter(d.key for d in starts)
        assert set(delivered) == set(keys), "some timers were never delivered"

        # Redeliveries only for work in flight at a kill, each recorded in the attempts history.
        by_key: dict[str, list[Delivery]] = defaultdict(list)
        for d in starts:
            by_key[d.key].append(d)
        duplicated = {key for key, n in delivered.items() if n > 1}
        for key in duplicated:
            deliveries = by_key[key]
            numbers = [d.attempt for d in deliveries]
            assert numbers == sorted(set(numbers)), f"{key}: attempt numbers {numbers}"
            assert all(d.pid in killed for d in deliveries[:-1]), (key, deliveries, killed)
            history = app.timers.attempts(key)
            outcomes = {a.number: a.outcome for a in history}
            assert history[-1].outcome is Outcome.DONE
            assert history[-1].number == deliveries[-1].attempt
            for d in deliveries[:-1]:
                assert outcomes[d.attempt] is Outcome.LOST, (key, history)
            assert app.get(key).attempts == len(history) > 1
        most = KILLS * (CONCURRENCY + BATCH)
        assert len(duplicated) <= most, (len(duplicated), most)

    # Every lost attempt belonged to a killed process; no node is left registered.
    conn = sqlite3.connect(db_path(db_url))
    try:
        lost_nodes = {
            row[0] for row in conn.execute("SELECT node_id FROM attempts WHERE outcome = 'lost'")
        }
        assert all(int(node.split("-")[-2]) in killed for node in lost_nodes), lost_nodes
        assert conn.execute("SELECT count(*) FROM nodes").fetchone()[0] == 0
        unfinished = conn.execute("SELECT count(*) FROM attempts WHERE finished_at IS NULL")
        assert unfinished.fetchone()[0] == 0
    finally:
        conn.close()
    print(f"{len(duplicated)} keys delivered twice after {KILLS} kills, {len(lost_nodes)} nodes")


def test_sigterm_finishes_work_in_flight_and_exits_0(
    tmp_path: Path, db_url: str, workers: Workers
) -> None:
    with App(db_url) as app:
        keys = schedule(app, 30, start_in=0.0, spread=0.05)
        # A grace of an hour: a worker that waited for it, not for its work in flight (1.5 s),
        # would outlast the wait below by far.
        proc = workers.start("--concurrency", "5", "--delay", "1.5", "--shutdown-grace", "3600")
        wait_until(lambda: count_starts(workers.log) >= 5, 60, "five handlers running")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(120) == 0, workers.stderr()

        deliveries = read_log(workers.log)
        started = {(d.key, d.attempt) for d in deliveries if d.what == "start"}
        ended = {(d.key, d.attempt) for d in deliveries if d.what == "end"}
        assert len(started) >= 5
        assert started == ended, "a handler in flight at SIGTERM did not finish"
        for key, attempt in started:
            timer = app.get(key)
            assert timer.status is Status.DONE
            assert [(a.number, a.outcome) for a in app.timers.attempts(key)] == [
                (attempt, Outcome.DONE)
            ]
        counts = app.timers.counts()
        assert counts[Status.RUNNING] == 0
        assert counts[Status.DONE] == len(started)
        assert counts[Status.SCHEDULED] == len(keys) - len(started)
        for key in set(keys) - {k for k, _ in started}:
            assert app.timers.attempts(key) == []
    conn = sqlite3.connect(db_path(db_url))
    try:
        assert conn.execute("SELECT count(*) FROM nodes").fetchone()[0] == 0
    finally:
        conn.close()
