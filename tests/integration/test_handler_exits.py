"""Whatever a handler raises fails its attempt, never the worker: ``SystemExit``,
``KeyboardInterrupt``, a bare ``BaseException``, ``GeneratorExit``, a ``CancelledError`` of its
own, or an exception whose ``str()`` fails, from a sync or an async handler, is retried and
then dead, with the exception named, like any error. A real SIGINT or SIGTERM still stops the
worker gracefully, and a real cancellation (shutdown) still interrupts an attempt.

On SQLite and PostgreSQL; the last tests run a real worker process among steady traffic.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from handler_worker_app import EXIT_ASYNC, EXIT_SYNC, WORK
from tests.scale import sized
from tests.waiting import run, wait_until

from duetime import App, AsyncApp, Event, Status

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from storekit import pooled_pg_url

APP = Path(__file__).with_name("handler_worker_app.py")
STEADY = sized(30, 60)
"""Timers fed at 20 a second around the three exits: 30 (1.5 s) by default. The exits end
within a second of the worker's first claim (three attempts, 0.1-0.2 s apart), so they still
happen among the traffic; the timer scheduled once they are dead (``slow-last``) shows the
worker still running handlers after them, at any size. 60 under ``DUETIME_TEST_SCALE=full``."""


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'exits.db'}"
        return
    with pooled_pg_url() as found:
        yield found


class BrokenStr(Exception):
    def __str__(self) -> str:
        raise ValueError("no text for this one")


RAISED: dict[str, Callable[[], BaseException]] = {
    "SystemExit": lambda: SystemExit(3),
    "KeyboardInterrupt": lambda: KeyboardInterrupt("from the handler"),
    "BaseException": lambda: BaseException("bare"),
    "GeneratorExit": lambda: GeneratorExit("from the handler"),
    "BrokenStr": BrokenStr,
}


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize("name", sorted(RAISED))
def test_what_a_handler_raises_fails_its_attempt_like_any_error(
    url: str, kind: str, name: str
) -> None:
    """Two timers of a handler that raises: one retried (3 attempts allowed), one dead (1
    allowed), both naming the exception; a good timer of the same claim is done."""

    async def main() -> None:
        app = AsyncApp(url, "ns", backoff_base=60, backoff_cap=60)
        make = RAISED[name]

        def sync_handler(event: Event) -> None:
            raise make()

        async def async_handler(event: Event) -> None:
            await asyncio.sleep(0)  # raised after a suspension, as from an awaited call
            raise make()

        app.handler("bad")(sync_handler if kind == "sync" else async_handler)

        @app.handler("good")
        def good(event: Event) -> None:
            pass

        async with app:
            await app.schedule("bad", None, delay=0, key="retried", max_attempts=3)
            await app.schedule("bad", None, delay=0, key="dead", max_attempts=1)
            await app.schedule("good", None, delay=0, key="good")
            stats = await app.tick()
            retried, dead, fine = [await app.get(k) for k in ("retried", "dead", "good")]
        assert stats.outcomes == Counter({"retry": 1, "dead": 1, "done": 1})
        assert retried.status is Status.RETRYING
        assert retried.attempts == 1
        assert (retried.last_error or "").startswith(f"{name}:"), retried.last_error
        assert dead.status is Status.DEAD
        assert (dead.last_error or "").startswith(f"gave up after 1 attempts: {name}:")
        assert fine.status is Status.DONE

    run(main)


def test_a_cancelled_error_of_the_handlers_own_is_a_failure_not_a_shutdown(url: str) -> None:
    """An awaited task that was cancelled raises CancelledError in the handler: nobody
    cancelled the attempt, so it is a failure (retried with backoff), not an interruption
    retried at once for ever."""

    async def main() -> None:
        app = AsyncApp(url, "ns", backoff_base=60, backoff_cap=60)

        @app.handler("bad")
        async def bad(event: Event) -> None:
            inner = asyncio.ensure_future(asyncio.sleep(10))
            await asyncio.sleep(0)
            inner.cancel()
            await inner

        async with app:
            await app.schedule("bad", None, delay=0, key="k", max_attempts=3)
            stats = await app.tick()
            timer = await app.get("k")
        assert stats.outcomes == Counter({"retry": 1})
        assert (timer.last_error or "").startswith("CancelledError"), timer.last_error

    run(main)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_real_shutdown_still_interrupts_a_running_handler(url: str, kind: str) -> None:
    """Past ``shutdown_grace`` the worker cancels what still runs: the attempt is recorded
    interrupted (retried at once elsewhere), and the worker stops."""

    async def main() -> None:
        app = AsyncApp(url, "ns", shutdown_grace=0.2)
        began = asyncio.Event()
        loop = asyncio.get_running_loop()

        def slow_sync(event: Event) -> None:
            loop.call_soon_threadsafe(began.set)
            time.sleep(2)

        async def slow_async(event: Event) -> None:
            began.set()
            await asyncio.sleep(30)

        app.handler("slow")(slow_sync if kind == "sync" else slow_async)
        async with app:
            await app.schedule("slow", None, delay=0, key="k", max_attempts=3)
            worker = app.worker()
            running = asyncio.create_task(worker.run())
            await asyncio.wait_for(began.wait(), 30)
            worker.stop()
            await running
            timer = await app.get("k")
        assert timer.status is Status.SCHEDULED or timer.status is Status.RETRYING
        assert timer.last_error == "worker shut down before the handler finished"

    run(main)


# -- a real worker process ------------------------------------------------------------------------


def log_lines(log: Path) -> list[list[str]]:
    return [line.split(",") for line in log.read_text().splitlines()] if log.exists() else []


@pytest.mark.slow
@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
def test_handlers_raising_exits_among_steady_traffic_never_stop_the_worker(
    url: str, tmp_path: Path, stop_signal: signal.Signals
) -> None:
    """Handlers raising SystemExit, KeyboardInterrupt and BaseException among ~20 timers a
    second: the worker never exits, every other timer runs once, the three end dead naming
    what they raised; then a real signal stops the worker gracefully, its handler in flight
    finishing first."""
    log = tmp_path / "starts.log"
    stderr = tmp_path / "worker.stderr"
    with App(url, "ns") as app, stderr.open("wb") as err:
        worker = subprocess.Popen(
            [sys.executable, str(APP), "--url", url, "--log", str(log), "--slow-delay", "1"],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        try:
            exits = {
                "exit-sync-systemexit": (EXIT_SYNC, "SystemExit"),
                "exit-async-keyboardinterrupt": (EXIT_ASYNC, "KeyboardInterrupt"),
                "exit-sync-baseexception": (EXIT_SYNC, "BaseException"),
            }
            for key, (type_, raised) in exits.items():
                app.schedule(type_, {"raise": raised}, delay=0, key=key, max_attempts=3)
            work = [f"w-{i:03d}" for i in range(STEADY)]
            for key in work:  # 20 a second
                app.schedule(WORK, None, delay=0, key=key)
                time.sleep(0.05)
                assert worker.poll() is None, stderr.read_text()[-5000:]

            def settled() -> bool:
                statuses = {k: app.get(k).status for k in [*work, *exits]}
                return all(statuses[k] is Status.DONE for k in work) and all(
                    statuses[k] is Status.DEAD for k in exits
                )

            wait_until(settled, 60, "every timer to end", explain=lambda: stderr.read_text())
            assert worker.poll() is None, stderr.read_text()[-5000:]
            for key, (_, raised) in exits.items():
                timer = app.get(key)
                assert timer.attempts == 3
                assert f"gave up after 3 attempts: {raised}:" in (timer.last_error or "")

            app.schedule(WORK, None, delay=0, key="slow-last")
            wait_until(
                lambda: any(line[:2] == ["start", "slow-last"] for line in log_lines(log)),
                30,
                "the slow handler to begin",
            )
            worker.send_signal(stop_signal)
            assert worker.wait(60) == 0, stderr.read_text()[-5000:]
            assert app.get("slow-last").status is Status.DONE
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
    starts = Counter(line[1] for line in log_lines(log) if line[0] == "start")
    assert {key: starts[key] for key in work} == dict.fromkeys(work, 1)
