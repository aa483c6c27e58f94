"""Workers whose clocks are minutes off, on one PostgreSQL database: the database's clock
decides, so none starts a timer early and none takes an attempt from a live worker.

Two worker processes run under libfaketime (Debian's ``faketime``), one 120 s ahead and one
120 s behind. Their handler asks the database for its clock as it starts (a clock their skew
cannot move) and runs longer than a lease, so leases must be renewed across the skew too.
"""

from __future__ import annotations

import glob
import os
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from pg_worker_app import CLOCKED
from test_postgres_workers import FAST_LEASE, NS, Workers, prepare
from tests.waiting import wait_until

from duetime import App, TimerRequest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from storekit import pooled_pg_url

pytestmark = pytest.mark.slow

SKEW = 120
TIMERS = 300
HANDLER_SECONDS = 3.0  # one and a half leases (FAST_LEASE: 2 s, renewed every 0.5 s)


def faketime_library() -> str:
    """libfaketime's multi-threaded build, which shifts every clock of a process it is loaded
    into (preloaded, so the worker gets SIGTERM itself, not a wrapper)."""
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketimeMT.so.1"))
    if not found:
        message = "libfaketime is not installed (apt-get install faketime)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found[0]


@pytest.fixture
def url() -> Iterator[str]:
    with pooled_pg_url() as found:
        yield found


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    w = Workers(tmp_path)
    try:
        yield w
    finally:
        w.cleanup()


def test_skewed_workers_never_start_early_nor_take_a_live_attempt(
    url: str, workers: Workers, tmp_path: Path
) -> None:
    library = faketime_library()
    db = prepare(url)
    log = tmp_path / "starts.log"
    options = ("--log", str(log), "--plain-delay", str(HANDLER_SECONDS), *FAST_LEASE)
    for skew in (f"+{SKEW}s", f"-{SKEW}s"):
        workers.start(url, *options, env={"LD_PRELOAD": library, "FAKETIME": skew})
    wait_until(lambda: db.value("SELECT count(*) FROM nodes") == 2, 30, "both workers", every=0.1)
    offsets = [row[0] for row in db.rows("SELECT clock_offset_ms FROM nodes ORDER BY 1")]
    assert offsets[0] == pytest.approx(-SKEW * 1000, abs=2000)  # reported: 120 s ahead
    assert offsets[1] == pytest.approx(SKEW * 1000, abs=2000)  # and 120 s behind

    first: datetime = db.value("SELECT clock_timestamp()") + timedelta(seconds=2)
    with App(url, NS) as app:
        app.timers.schedule_many(
            TimerRequest(CLOCKED, at=first + timedelta(seconds=6 * i / TIMERS), key=f"k{i}")
            for i in range(TIMERS)
        )
    wait_until(
        lambda: db.done() == TIMERS,
        120,
        "every timer done",
        every=0.25,
        explain=lambda: f"{db.statuses()}\n{workers.stderr()}",
    )
    workers.stop_all()

    due = dict(db.rows("SELECT key, due_at FROM timers"))
    starts = [line.split(",") for line in log.read_text().splitlines()]
    early = [
        (key, started, due[key])
        for key, _, _, started in starts
        if datetime.fromisoformat(started) < due[key]
    ]
    assert early == [], f"{len(early)} early starts, e.g. {early[:3]}"
    assert sorted(key for key, *_ in starts) == sorted(due), "every timer started exactly once"
    assert {attempt for _, attempt, _, _ in starts} == {"1"}
    taken = db.value("SELECT count(*) FROM all_attempts WHERE outcome = 'lost'")
    assert taken == 0, "an attempt was taken from a live worker"
    assert len({pid for _, _, pid, _ in starts}) == 2, "both skewed workers fired timers"
