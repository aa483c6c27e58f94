"""``App.run_worker`` runs on the app's own event loop: an app used before its worker starts,
and handlers that call the app while it works (a follow-up), share its connections safely.

On PostgreSQL the store's connections and its wake-up listener belong to the loop that opened
them; a worker on a second loop failed on the first app call made before it (the listener's
task was "attached to a different loop"). Skipped without PostgreSQL, failed under CI.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from duetime import App, Event, Status

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from storekit import pooled_pg_url


@pytest.fixture
def pg_url() -> Iterator[str]:
    with pooled_pg_url() as url:
        yield url


def test_handlers_schedule_follow_ups_through_the_app_that_works(pg_url: str) -> None:
    app = App(pg_url, "shop")
    seen: list[str] = []

    @app.handler("order.placed")
    def placed(event: Event) -> None:
        seen.append(event.key)
        app.schedule("order.follow_up", event.payload, key=f"{event.key}-follow-up", delay=0)

    @app.handler("order.follow_up")
    def follow_up(event: Event) -> None:
        seen.append(event.key)
        os.kill(os.getpid(), signal.SIGTERM)  # the worker stops once this one is done

    app.schedule("order.placed", {"order": 7}, key="o7", delay=0)  # opens the app first
    try:
        stats = app.run_worker()
        assert seen == ["o7", "o7-follow-up"]
        assert stats.outcomes["done"] == 2
        assert app.get("o7-follow-up").status is Status.DONE  # the app still works after
    finally:
        app.close()


@pytest.mark.timeout(60)
def test_a_sigterm_another_thread_receives_stops_the_worker(pg_url: str) -> None:
    """The kernel may give a process's SIGTERM to any of its threads; Python runs the handler
    in the main thread, which waits for the worker meanwhile. Here the signal goes to the
    handler's own thread: the worker must stop all the same (it once waited forever)."""
    app = App(pg_url, "shop")
    seen: list[str] = []

    @app.handler("order.placed")
    def placed(event: Event) -> None:
        seen.append(event.key)
        signal.pthread_kill(threading.get_ident(), signal.SIGTERM)

    app.schedule("order.placed", {"order": 8}, key="o8", delay=0)
    try:
        stats = app.run_worker()
        assert seen == ["o8"]
        assert stats.outcomes["done"] == 1
    finally:
        app.close()
