"""Three worker processes, real time: every occurrence fires exactly once; after everything was
down, catch-up behaves as each schedule says (SQLite and PostgreSQL).

The processes share a clock shifted so that a minute boundary falls a few seconds into the run:
the every-minute cron then fires once without the test waiting for a real minute to turn. Each
runs the worker and the schedule materialiser side by side (the worker's own, once it has one).
The run's clock starts when every worker has said it is ready and been told the shift, not
when the processes were started: on a busy machine starting them takes seconds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path

import pytest

from duetime import App
from duetime.model import Timer

# The PostgreSQL probe lives beside the store tests; pytest does not put it on sys.path.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from storekit import pooled_pg_url
from tests.waiting import wait_until

POLICIES = ("latest", "all", "none")
LOOKAHEAD = 1.0
GRACE = 1.0
WORKERS = 3

WORKER = """
import asyncio, os, signal, sys
from datetime import UTC, datetime, timedelta

from duetime import AsyncApp
from duetime.services.materializer import Materializer


class ShiftedClock:
    def __init__(self) -> None:
        self.offset = timedelta()

    def now(self) -> datetime:
        return datetime.now(UTC) + self.offset


async def main() -> None:
    clock = ShiftedClock()
    app = AsyncApp(os.environ["URL"], "ns", clock=clock)
    out = os.environ["OUT"]

    async def record(event) -> None:
        with open(out, "a") as sink:
            sink.write(event.key + "\\n")

    for kind in ("latest", "all", "none", "minute"):
        app.handler("t." + kind)(record)
    await app.open()
    worker = app.worker()
    lookahead = timedelta(seconds=float(os.environ["LOOKAHEAD"]))
    materializer = worker.service(Materializer)  # every worker runs one
    assert materializer is not None
    materializer.lookahead = lookahead

    def on_term() -> None:
        worker.stop()

    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, on_term)
    print("ready", flush=True)
    shift = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    clock.offset = timedelta(seconds=float(shift))  # the run's clock starts now
    await worker.run()
    await app.close()


asyncio.run(main())
"""


STARTED: list[subprocess.Popen[str]] = []
"""Every worker process the current test started: killed after it, however it ended."""


@pytest.fixture(autouse=True)
def kill_what_the_test_started() -> Iterator[None]:
    try:
        yield
    finally:
        while STARTED:
            worker = STARTED.pop()
            if worker.poll() is None:
                worker.kill()
            worker.communicate()


@dataclass(frozen=True)
class FrozenClock:
    instant: datetime

    def now(self) -> datetime:
        return self.instant


@dataclass
class Fleet:
    url: str
    tmp: Path
    offset: float = 0.0

    def now(self) -> datetime:
        return datetime.now(UTC) + timedelta(seconds=self.offset)

    def start(self, out: Path) -> list[subprocess.Popen[str]]:
        script = self.tmp / "schedule_worker.py"
        script.write_text(WORKER)
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("DUETIME_")},
            "URL": self.url,
            "OUT": str(out),
            "LOOKAHEAD": repr(LOOKAHEAD),
        }
        workers = [
            subprocess.Popen(
                [sys.executable, str(script)],
                cwd=self.tmp,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(WORKERS)
        ]
        STARTED.extend(workers)
        for worker in workers:
            assert worker.stdout is not None
            assert worker.stdout.readline().strip() == "ready", worker.communicate()[1]
        return workers

    def go(self, workers: list[subprocess.Popen[str]], at: datetime | None = None) -> None:
        """Start the ready ``workers`` on the shared clock, shifted so that it reads ``at`` now
        (by default: shifted as before)."""
        if at is not None:
            self.offset = (at - datetime.now(UTC)).total_seconds()
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.write(f"{self.offset!r}\n")
            worker.stdin.flush()

    @staticmethod
    def stop(workers: list[subprocess.Popen[str]]) -> None:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            _, stderr = worker.communicate(timeout=120)
            assert worker.returncode == 0, stderr
            assert "Traceback" not in stderr, stderr

    def sleep_until(self, instant: datetime) -> None:
        time.sleep(max((instant - self.now()).total_seconds(), 0))


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'duetime.db'}"
        return
    with pooled_pg_url() as url:
        yield url


def fired(out: Path) -> Counter[str]:
    return Counter(out.read_text().split()) if out.exists() else Counter()


def timers_of(app: App, name: str) -> list[Timer]:
    page = app.timers.history(type=f"t.{name}", limit=1000)
    return sorted(page.items, key=lambda t: t.due_at)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_three_workers_fire_each_occurrence_once_and_catch_up_as_told(
    database_url: str, tmp_path: Path
) -> None:
    fleet = Fleet(database_url, tmp_path)
    out = tmp_path / "fired.txt"
    workers = fleet.start(out)  # ready, waiting to be told the clock
    real = datetime.now(UTC)
    boundary = real.replace(second=0, microsecond=0) + timedelta(minutes=2)
    start = boundary - timedelta(seconds=6)  # the run's first instant, on the shifted clock
    first_tick = start + timedelta(seconds=4)
    with App(database_url, "ns", clock=FrozenClock(start)) as app:
        for policy in POLICIES:
            app.schedules.add(
                policy,
                f"t.{policy}",
                every=1,
                start_at=first_tick,
                catch_up=policy,
                catch_up_grace=GRACE,
            )
        app.schedules.add(
            "minute", "t.minute", cron="* * * * *", start_at=first_tick, catch_up_grace=GRACE
        )

    fleet.go(workers, at=start)
    fleet.sleep_until(boundary + timedelta(seconds=2.5))
    Fleet.stop(workers)
    stopped = fleet.now()
    first_run = fired(out)
    assert first_run[f"schedule:minute:{boundary.isoformat().replace('+00:00', 'Z')}"] == 1
    assert sum(first_run.values()) == len(first_run)  # nothing twice
    for policy in POLICIES:
        keys = sorted(k for k in first_run if k.startswith(f"schedule:{policy}:"))
        assert len(keys) >= 4, keys
        instants = [datetime.fromisoformat(k.split(":", 2)[2]) for k in keys]
        assert instants[0] == first_tick
        assert all(b - a == timedelta(seconds=1) for a, b in pairwise(instants)), keys

    fleet.sleep_until(stopped + timedelta(seconds=3))  # everything down
    restarted = fleet.now()
    workers = fleet.start(out)
    fleet.go(workers)
    with App(database_url, "ns", clock=fleet) as app:

        def fired_again(policy: str) -> bool:
            """An occurrence due since the restart fired: the catch-up lies behind it."""
            return any(
                t.due_at >= restarted and t.status.value == "done" for t in timers_of(app, policy)
            )

        wait_until(
            lambda: all(fired_again(policy) for policy in POLICIES),
            240,
            "every schedule to fire again after the restart",
        )
        cutoff = fleet.now()

        def caught_up() -> bool:
            """Every occurrence due before ``cutoff`` ran: a busy machine's workers may lag."""
            return all(
                t.status.value == "done"
                for policy in POLICIES
                for t in timers_of(app, policy)
                if t.due_at < cutoff
            )

        wait_until(caught_up, 240, "every occurrence due before the cut-off to run")
    Fleet.stop(workers)

    everything = fired(out)
    assert sum(everything.values()) == len(everything), everything.most_common(3)
    with App(database_url, "ns", clock=fleet) as app:
        for policy in POLICIES:
            timers = timers_of(app, policy)
            due = [t for t in timers if t.due_at < cutoff]
            assert {t.key for t in due} <= set(everything), policy
            assert all(t.status.value == "done" for t in due), policy
            # Made after their instant, for an instant no fleet was up to make it in time
            # (before the restarted fleet first made this schedule's occurrences): what the
            # catch-up made. On a loaded machine the materialiser, a second ahead, may also make
            # an occurrence a moment late while running: no catch-up, not counted.
            made_again = min(t.registered_at for t in timers if t.registered_at > stopped)
            late = [
                t for t in timers if t.registered_at > t.due_at and stopped < t.due_at <= made_again
            ]
            steps = {b.due_at - a.due_at for a, b in pairwise(timers)}
            gap = steps != {timedelta(seconds=1)}
            if policy == "all":
                assert len(late) >= 2, policy  # every missed occurrence, made late
                assert not gap, policy
            elif policy == "latest":
                assert len(late) == 1, policy  # once, for the latest missed
                assert gap, policy
            else:
                assert late == [], policy
                assert gap, policy
        minute = timers_of(app, "minute")
        assert [t.key for t in minute if t.status.value == "done"] == [
            f"schedule:minute:{boundary.isoformat().replace('+00:00', 'Z')}"
        ]
    print(json.dumps({"fired": len(everything)}))
