"""Several processes on one SQLite file: two workers and a third process that schedules.

Every timer is delivered exactly once (no kills, so no redeliveries), and a timer scheduled by
the third process while both workers sleep towards a far-future timer fires promptly: the
cross-process wake-up reached them (otherwise they would sleep until the 30 s safety re-check).
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from crash_worker_app import asleep_towards
from tests.waiting import wait_until

from duetime import App, Status

pytestmark = pytest.mark.slow  # worker and scheduler processes on one file

APP = Path(__file__).with_name("crash_worker_app.py")
TIMERS = 3_000


def query(db_url: str, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(db_url[len("sqlite:///") :])
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


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


def test_two_workers_and_a_scheduler_process_share_one_file(
    tmp_path: Path, db_url: str, procs: list[subprocess.Popen[bytes]]
) -> None:
    log = tmp_path / "deliveries.log"
    with App(db_url) as app:
        far = app.schedule("work", None, at=datetime.now(UTC) + timedelta(hours=1), key="far")
        assert far.action == "created"

    idle_log = tmp_path / "idle.log"
    for i in range(2):
        stderr = (tmp_path / f"worker-{i}.stderr").open("wb")
        cmd = [sys.executable, str(APP), "worker", "--db", db_url, "--log", str(log)]
        cmd += ["--idle-log", str(idle_log)]
        procs.append(subprocess.Popen([*cmd, "--recheck", "30"], stderr=stderr))
        stderr.close()
    wait_until(lambda: query(db_url, "SELECT count(*) FROM nodes")[0][0] == 2, 30, "2 workers")

    workers = {proc.pid for proc in procs}
    # Both have read the next due time (an hour away) and gone to sleep.
    due = far.timer.due_at
    wait_until(lambda: asleep_towards(idle_log, due) == workers, 30, "both workers asleep")

    options = ["--probe", "probe", "--probe-in", "1.0", "--count", str(TIMERS)]
    options += ["--start-in", "1.5", "--spread", "2"]
    scheduler = subprocess.run(
        [sys.executable, str(APP), "schedule", "--db", db_url, *options],
        capture_output=True,
        timeout=60,
    )
    assert scheduler.returncode == 0, scheduler.stderr.decode()

    def all_done() -> bool:
        rows = dict(query(db_url, "SELECT status, count(*) FROM timers GROUP BY status"))
        return rows.get(Status.DONE.value) == TIMERS + 1

    wait_until(all_done, 60, "every timer done")
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
    for i, proc in enumerate(procs):
        errors = (tmp_path / f"worker-{i}.stderr").read_text(errors="replace")
        assert proc.wait(30) == 0, errors

    starts = [line.split(",") for line in log.read_text().splitlines() if line.startswith("start")]
    delivered = Counter(key for _, key, _, _, _ in starts)
    assert set(delivered) == {"probe"} | {f"t-{i:05d}" for i in range(TIMERS)}
    assert max(delivered.values()) == 1, [k for k, n in delivered.items() if n > 1][:10]
    assert {int(attempt) for _, _, attempt, _, _ in starts} == {1}
    pids = Counter(int(pid) for _, _, _, pid, _ in starts)
    assert set(pids) <= {proc.pid for proc in procs}
    print(f"deliveries per worker process: {dict(pids)}")

    with App(db_url) as app:
        probe = app.get("probe")
        assert probe.status is Status.DONE
        assert app.get("far").status is Status.SCHEDULED
        assert app.timers.counts()[Status.RUNNING] == 0
    (fired_at,) = [float(at) for _, key, _, _, at in starts if key == "probe"]
    late = fired_at - probe.due_at.timestamp()
    print(f"probe fired {late * 1000:.1f} ms after it was due")
    assert 0 <= late < 1.0, "the sleeping workers were not woken by the other process"
