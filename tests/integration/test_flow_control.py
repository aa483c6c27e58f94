"""Flow control across 3 worker processes, on SQLite and PostgreSQL: a rate is never exceeded
in any window, a concurrency limit never by the handlers running at once (as they record it),
a pause starts nothing and a resume lets every held timer go in due order.

Workers are subprocesses (``crash_worker_app.py``): each handler start and end is a line of the
shared log with the process's id and the time. The rate test stores 1,000 timers due at once
(at 200/s: 5 s of starts); ``DUETIME_TEST_SCALE=full`` stores 5,000 (25 s), and
``DUETIME_TEST_FLOW_TIMERS`` an exact count.
"""

from __future__ import annotations

import math
import signal
import subprocess
import sys
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from tests.scale import sized
from tests.waiting import wait_until

from duetime import App, Status, TimerRequest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))
from storekit import pooled_pg_url

pytestmark = pytest.mark.slow

APP = Path(__file__).with_name("crash_worker_app.py")
WORK = "work"
WORKERS = 3
CONCURRENCY = 20
"""Each worker's ``concurrency`` (``crash_worker_app.py``'s default)."""
PAUSE_BATCH = 10
"""The most rows a worker claims at once in the pause test (``--batch-size``): what bounds how
far a start strays from its due place within a process."""
RATE_TIMERS = sized(1_000, 5_000, override="DUETIME_TEST_FLOW_TIMERS")
START_LAG = 0.025
"""The limit grants starts on the database's clock and each worker holds a granted row until
100 ms after its grant (``flow.RATE_START_DELAY``), by its own estimate of that clock, then
starts it as soon as its event loop wakes: on a loaded machine, some ms late, not all by the
same amount. So a window of starts may hold the grants of a window this much longer: the bound
on starts is ``rate * window + burst + ceil(rate * START_LAG)`` (measured: at most 2 starts
over ``rate * window + burst`` at 200/s, 1 at 1,000/s; see bench/README.md)."""


@dataclass(frozen=True)
class Line:
    what: str
    key: str
    pid: int
    at: float


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'duetime.db'}"
        return
    with pooled_pg_url() as found:
        yield found


class Workers:
    def __init__(self, url: str, tmp_path: Path) -> None:
        self.url = url
        self.tmp_path = tmp_path
        self.log = tmp_path / "deliveries.log"
        self.idle_log = tmp_path / "idle.log"
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, *options: str) -> None:
        for i in range(WORKERS):
            stderr = (self.tmp_path / f"worker-{i}.stderr").open("wb")
            cmd = [sys.executable, str(APP), "worker", "--db", self.url, "--log", str(self.log)]
            self.procs.append(subprocess.Popen([*cmd, "--lease", "10", *options], stderr=stderr))
            stderr.close()

    def lines(self, what: str = "start") -> list[Line]:
        if not self.log.exists():
            return []
        found = []
        for row in self.log.read_text().splitlines():
            kind, key, _, pid, at = row.split(",")
            if kind == what:
                found.append(Line(kind, key, int(pid), float(at)))
        return sorted(found, key=lambda line: line.at)

    def idle_lines(self) -> list[str]:
        """The whole lines of the ``--idle-log``: one each time a worker went to sleep with
        nothing to claim."""
        if not self.idle_log.exists():
            return []
        return self.idle_log.read_text().split("\n")[:-1]

    def asleep(self, since: int = 0) -> set[int]:
        """The workers that went to sleep with nothing to claim, in the idle lines from the
        ``since``-th on."""
        return {int(line.split(",")[1]) for line in self.idle_lines()[since:]}

    def stderr(self) -> str:
        return "\n".join(p.read_text()[-3000:] for p in self.tmp_path.glob("worker-*.stderr"))

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture
def workers(url: str, tmp_path: Path) -> Iterator[Workers]:
    with App(url):
        pass  # migrated, with its default namespace, before the workers race to do it
    running = Workers(url, tmp_path)
    try:
        yield running
    finally:
        running.stop()


def store_due(url: str, count: int) -> None:
    """``count`` timers due a minute ago, 1 ms apart (keys t-00000… in due order)."""
    first = datetime.now(UTC) - timedelta(minutes=1)
    with App(url) as app:
        for start in range(0, count, 1000):
            app.timers.schedule_many(
                [
                    TimerRequest(
                        WORK, {"i": i}, at=first + timedelta(milliseconds=i), key=f"t-{i:05d}"
                    )
                    for i in range(start, min(start + 1000, count))
                ]
            )


def count_done(url: str) -> int:
    with App(url) as app:
        return app.timers.counts().get(Status.DONE, 0)


def most_in_window(starts: list[float], window: float) -> int:
    """The most starts in any window of ``window`` seconds (each window opening at a start)."""
    return max(bisect_left(starts, at + window) - i for i, at in enumerate(starts))


def test_a_rate_holds_across_processes_and_every_timer_runs(workers: Workers) -> None:
    with App(workers.url) as app:
        rule = app.limits.set(WORK, rate="200/s")
    burst = rule.effective_burst
    workers.start()
    store_due(workers.url, RATE_TIMERS)
    wait_until(
        lambda: count_done(workers.url) == RATE_TIMERS,
        RATE_TIMERS / 200 * 3 + 30,
        f"all done\n{workers.stderr()}",
    )
    lines = workers.lines()
    assert sorted(line.key for line in lines) == [f"t-{i:05d}" for i in range(RATE_TIMERS)]
    assert len({line.pid for line in lines}) > 1  # the processes shared the work
    starts = [line.at for line in lines]
    for window in (1.0, 2.0):
        bound = round(200 * window) + burst + math.ceil(200 * START_LAG)
        assert most_in_window(starts, window) <= bound, window
    spent = starts[-1] - starts[0]
    assert spent >= (RATE_TIMERS - burst) / 200 * 0.98  # held back, not dropped


def test_a_concurrency_limit_holds_across_processes(workers: Workers) -> None:
    total = 300
    with App(workers.url) as app:
        app.limits.set(WORK, concurrency=5)
    workers.start("--delay", "0.05")
    store_due(workers.url, total)
    wait_until(lambda: count_done(workers.url) == total, 60, f"all done\n{workers.stderr()}")
    events = sorted(
        [(line.at, 1) for line in workers.lines("start")]
        + [(line.at, -1) for line in workers.lines("end")],
        key=lambda event: (event[0], event[1]),  # an end before a start at the same instant
    )
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    assert len(workers.lines("start")) == total
    assert peak <= 5
    assert peak >= 2  # the limit, not one slow process, kept the pace
    assert len({line.pid for line in workers.lines()}) > 1


def test_pause_starts_nothing_and_resume_starts_everything_in_due_order(
    workers: Workers,
) -> None:
    total = 300
    with App(workers.url) as app:
        app.limits.pause(WORK)
    workers.start("--batch-size", str(PAUSE_BATCH), "--idle-log", str(workers.idle_log))
    pids = {proc.pid for proc in workers.procs}
    wait_until(lambda: workers.asleep() == pids, 60, f"every worker asleep\n{workers.stderr()}")
    since = len(workers.idle_lines())
    store_due(workers.url, total)
    # Woken by the timers stored, each worker claimed under the pause and went back to sleep.
    wait_until(
        lambda: workers.asleep(since) == pids, 60, f"every worker asleep\n{workers.stderr()}"
    )
    assert workers.lines() == []
    with App(workers.url) as app:
        assert app.timers.counts().get(Status.SCHEDULED) == total
        (status,) = app.limits.list()
        assert status.held == total
        app.limits.resume(WORK)
    wait_until(lambda: count_done(workers.url) == total, 60, f"all done\n{workers.stderr()}")
    lines = workers.lines()
    assert sorted(line.key for line in lines) == [f"t-{i:05d}" for i in range(total)]
    order = [int(line.key[2:]) for line in lines]
    # Each process starts its rows in due order, up to two claims: it starts its claims' rows
    # in the order it sent the claims, each claim takes the oldest due rows (not necessarily
    # handing them back in order), and of its two claims under way the server may run the
    # later first (see producer.CLAIMS_IN_FLIGHT); a claim takes at most --batch-size rows (its
    # free slots and its prefetch included). Across processes the order is the machine's: a
    # process descheduled between its claim and its starts has its rows overtaken by every row
    # the others start meanwhile, however many.
    for pid in {line.pid for line in lines}:
        own = [int(line.key[2:]) for line in lines if line.pid == pid]
        ranked = {index: rank for rank, index in enumerate(sorted(own))}
        displaced = max(abs(position - ranked[index]) for position, index in enumerate(own))
        assert displaced <= 2 * PAUSE_BATCH, (pid, own)
    assert max(order[: total // 10]) < total // 2  # the oldest went first
