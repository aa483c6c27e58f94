"""Plain (sync) handlers keep the worker's promises: as many run at once as ``concurrency``
says, and none begins once its lease has run out, however long it waited for its thread. On
SQLite and PostgreSQL.

A worker paused past its lease (SIGSTOP) and woken again must start nothing the database has
meanwhile recorded lost: the last test pauses a real worker process with more sync handlers in
flight than the thread pool used to have (6 on a 2-core machine), while another one takes over.
"""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from handler_worker_app import WORK
from tests.waiting import run, until, wait_until

from duetime import App, AsyncApp, Event, Status, TimerRequest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from storekit import pooled_pg_url

APP = Path(__file__).with_name("handler_worker_app.py")


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'sync.db'}"
        return
    with pooled_pg_url() as found:
        yield found


async def wait_for(app: AsyncApp, keys: list[str], status: Status, within: float = 60) -> None:
    found: list[Status] = []

    async def reached() -> bool:
        found[:] = [(await app.get(key)).status for key in keys]
        return all(s is status for s in found)

    await until(reached, within, f"every timer {status.value}", every=0.05, explain=found.__str__)


def test_sync_handlers_run_as_many_at_once_as_concurrency_allows(url: str) -> None:
    """20 handlers that each wait until all 20 are in: only possible if all run at once."""
    count = 20
    inside = 0
    lock = threading.Lock()
    all_in, release = threading.Event(), threading.Event()

    async def main() -> None:
        app = AsyncApp(url, "ns", concurrency=count)

        @app.handler("email.send")
        def send(event: Event) -> None:
            nonlocal inside
            with lock:
                inside += 1
                if inside == count:
                    all_in.set()
            release.wait(60)

        keys = [f"mail-{i}" for i in range(count)]
        async with app:
            await app.timers.schedule_many(
                [TimerRequest("email.send", None, delay=0, key=k) for k in keys]
            )
            worker = app.worker()
            running = asyncio.create_task(worker.run())
            try:
                together = await asyncio.to_thread(all_in.wait, 30)
                assert together, (
                    f"{inside} of {count} sync handlers ran at once (concurrency {count})"
                )
            finally:
                release.set()
            await wait_for(app, keys, Status.DONE)
            worker.stop()
            await running
        assert worker.stats.outcomes["done"] == count

    run(main)


class LateInHandlerThreads:
    """The real clock, read a minute later in the handler threads: as if the worker had been
    paused between handing a row to a thread and the thread beginning it."""

    def now(self) -> datetime:
        now = datetime.now(UTC)
        if threading.current_thread().name == "duetime-handler":
            return now + timedelta(minutes=1)
        return now


def test_a_sync_handler_whose_lease_ran_out_before_its_thread_began_does_not_run(url: str) -> None:
    called: list[str] = []

    async def main() -> None:
        app = AsyncApp(url, "ns", clock=LateInHandlerThreads(), lease=10, heartbeat=2)

        @app.handler("email.send")
        def send(event: Event) -> None:
            called.append(event.key)

        async with app:
            await app.schedule("email.send", None, delay=0, key="late")
            stats = await app.tick()
            timer = await app.get("late")
        assert called == [], "the handler began in its thread after its lease had run out"
        assert stats.outcomes["done"] == 0
        assert timer.status is Status.SCHEDULED  # given back unstarted, for any node to run

    run(main)


# -- a real worker paused past its lease ----------------------------------------------------------


def start_worker(url: str, log: Path, stderr: Path, *options: str) -> subprocess.Popen[bytes]:
    with stderr.open("wb") as err:
        return subprocess.Popen(
            [sys.executable, str(APP), "--url", url, "--log", str(log), *options],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )


def rows(url: str, query: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    """Rows read with SQL from the store's own tables (a connection of the test's own)."""
    if url.startswith("sqlite:"):
        with sqlite3.connect(url.removeprefix("sqlite:///"), timeout=30) as conn:
            return conn.execute(query, params).fetchall()
    import psycopg

    from duetime.store.postgres.settings import parse_url

    with psycopg.connect(parse_url(url).conninfo, autocommit=True) as pg:
        return pg.execute(query.replace("?", "%s"), params).fetchall()


def attempts_view(url: str) -> str:
    return "attempts" if url.startswith("sqlite:") else "all_attempts"


@pytest.mark.slow
def test_a_worker_paused_past_its_lease_starts_no_sync_handler_taken_over(
    url: str, tmp_path: Path
) -> None:
    """Concurrency 30, sync handlers of 1 s, lease 2 s: paused with 30 rows in flight, the
    worker must start none of them after it wakes (another node has run them by then)."""
    total, concurrency = 60, 30
    log = tmp_path / "starts.log"
    lease = ("--lease", "2", "--heartbeat", "0.5", "--rescue-interval", "0.5")
    with App(url, "ns") as app:  # migrate, then store the work: all due now
        now = datetime.now(UTC)
        app.timers.schedule_many(
            [TimerRequest(WORK, None, at=now, key=f"w-{i:03d}") for i in range(total)]
        )
    paused = start_worker(
        url, log, tmp_path / "paused.stderr", *lease, "--concurrency", str(concurrency),
        "--delay", "1",
    )  # fmt: skip
    others: list[subprocess.Popen[bytes]] = []
    try:

        def running() -> int:
            return int(rows(url, "SELECT count(*) FROM timers WHERE status = 'running'")[0][0])

        wait_until(lambda: running() >= concurrency, 30, "the worker to claim its fill")
        wait_until(lambda: log.exists() and log.read_text().count("start,") >= 6, 30, "starts")
        paused.send_signal(signal.SIGSTOP)
        stopped_at = time.time()
        others.append(start_worker(url, log, tmp_path / "other.stderr", *lease, "--delay", "0"))

        def all_done() -> bool:
            return rows(url, "SELECT count(*) FROM timers WHERE status <> 'done'")[0][0] == 0

        wait_until(all_done, 60, "the other worker to run everything")
        continued_at = time.time()
        paused.send_signal(signal.SIGCONT)

        def handlers_ended(pid: int) -> bool:
            """Every handler ``pid`` started has ended (its log's start and end lines)."""
            lines = [line.split(",") for line in log.read_text().splitlines()]
            mine = [fields[0] for fields in lines if fields[3] == str(pid)]
            return mine.count("start") == mine.count("end")

        # awake: its handlers under way end, their outcomes are fenced off
        wait_until(lambda: handlers_ended(paused.pid), 60, "the paused worker's handlers to end")
        paused.send_signal(signal.SIGTERM)  # finishes everything it started, then exits
        assert paused.wait(60) == 0, (tmp_path / "paused.stderr").read_text()[-5000:]
    finally:
        for proc in (paused, *others):
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    lost = {
        (str(key), int(str(number)))
        for key, number in rows(
            url,
            f"SELECT t.key, a.number FROM {attempts_view(url)} a JOIN timers t ON t.id = "
            "a.timer_id WHERE a.outcome = 'lost'",
        )
    }
    assert lost, "nothing was taken over from the paused worker"
    # When the lease check let each of the paused worker's attempts begin: the last ``begun``
    # of an attempt is its handler's thread's. A handler's own ``start`` line can come after a
    # pause that fell between the check and the line, so it cannot say which side of the
    # pause the check was on; the check's instant can, with seconds to spare either side.
    begun: dict[tuple[str, int], float] = {}
    for line in log.read_text().splitlines():
        what, key, attempt, pid, at = line.split(",")
        if what == "begun" and int(pid) == paused.pid:
            begun[key, int(attempt)] = float(at)
    assert begun, "the paused worker began nothing"
    midway = (stopped_at + continued_at) / 2
    stale = [attempt for attempt, at in begun.items() if at > midway and attempt in lost]
    assert stale == [], f"{len(stale)} stale starts after SIGCONT, e.g. {stale[:5]}"
