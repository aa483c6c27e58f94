"""A worker process for the PostgreSQL multi-worker tests (run as a script, not a test).

``worker``: runs a duetime worker of namespace ``--namespace`` on ``--url`` until SIGTERM/SIGINT.

- ``tx`` events have a *transactional* handler: it is called with the connection of the
  transaction that marks the timer done, and inserts one row ``(key, attempt, pid)`` into the
  user table ``fx`` of the store's schema (the connection's ``search_path``), after sleeping
  ``--delay`` seconds inside that transaction. ``fx`` has no unique constraint on purpose: a
  duplicated effect would show as a second row, not be hidden by a conflict.
- ``plain`` events have an ordinary handler: it sleeps ``--plain-delay`` seconds and appends
  ``<key>,<attempt>,<pid>,<unix time>`` to ``--log`` (one ``write`` to an ``O_APPEND`` file,
  so it survives SIGKILL and lines never interleave). With ``--fail-first``, attempt 1 raises
  after logging (the worker then tries to record a retry).
- ``clocked`` events have an ordinary handler that asks the database for its clock as it starts
  and appends ``<key>,<attempt>,<pid>,<database time, ISO 8601>`` to ``--log``, then sleeps
  ``--plain-delay`` seconds: a start measured by a clock the worker's own skew cannot move.

With ``--idle-log``, each time the worker goes to sleep with nothing to claim it appends
``idle,<pid>,<next due time, ISO 8601, or "-">,<unix time>`` to that file (the ``idle`` hook).
With ``--started-log``, each time a handler begins it appends ``<type>,<key>,<attempt>,<pid>``
to that file (the ``started`` hook): what a test waits for where a handler must be under way.

The test creates ``fx`` before starting workers (``create_fx``). Settings come from the options
below; everything else from ``DUETIME_*`` environment variables, as in production.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from crash_worker_app import IdleLog

from duetime import AsyncApp, Event
from duetime.app.runner import run_process
from duetime.model import Timer
from duetime.worker import WorkerObserver

TX = "tx"
PLAIN = "plain"
CLOCKED = "clocked"
FX_TABLE = """
CREATE TABLE IF NOT EXISTS fx (
    key text NOT NULL,
    attempt integer NOT NULL,
    pid integer NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX IF NOT EXISTS fx_key ON fx (key)
"""
"""The handlers' user table: deliberately without a primary key or unique constraint (the
index is not unique: it only makes the tests' checks fast)."""


class StartLog(WorkerObserver):
    """Appends ``<type>,<key>,<attempt>,<pid>`` to ``path`` each time a handler begins."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.pid = os.getpid()

    def started(self, timer: Timer, attempt: int, lateness: timedelta) -> None:
        os.write(self.fd, f"{timer.type},{timer.key},{attempt},{self.pid}\n".encode())


def begun(path: Path, pid: int, type: str) -> set[tuple[str, int]]:
    """The ``(key, attempt)`` of the handlers of ``type`` that worker ``pid`` began, as its
    ``--started-log`` at ``path`` says."""
    if not path.exists():
        return set()
    lines = [line.split(",") for line in path.read_text().split("\n")[:-1]]
    return {(key, int(n)) for kind, key, n, by in lines if kind == type and int(by) == pid}


def worker(args: argparse.Namespace) -> int:
    app = AsyncApp(
        args.url,
        args.namespace,
        concurrency=args.concurrency,
        batch_size=args.batch_size,
        lease=args.lease,
        heartbeat=args.heartbeat,
        rescue_interval=args.rescue_interval,
        recheck=args.recheck,
        backoff_base=args.backoff_base,
        shutdown_grace=args.shutdown_grace,
    )
    pid = os.getpid()
    fd = os.open(args.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) if args.log else None
    if args.idle_log:
        app.observers.append(IdleLog(args.idle_log))
    if args.started_log:
        app.observers.append(StartLog(args.started_log))

    @app.handler(TX, transactional=True)
    async def effect(event: Event, conn: Any) -> None:
        if args.delay:
            await asyncio.sleep(args.delay)
        await conn.execute(
            "INSERT INTO fx (key, attempt, pid) VALUES (%s, %s, %s)",
            (event.key, event.attempt, pid),
        )

    @app.handler(PLAIN)
    async def plain(event: Event) -> None:
        if args.plain_delay:
            await asyncio.sleep(args.plain_delay)
        if fd is not None:
            os.write(fd, f"{event.key},{event.attempt},{pid},{time.time():.6f}\n".encode())
        if args.fail_first and event.attempt == 1:
            raise RuntimeError("first attempts fail in this worker")

    @app.handler(CLOCKED)
    async def clocked(event: Event) -> None:
        started = await app.store.db_now()
        assert started is not None
        if fd is not None:
            line = f"{event.key},{event.attempt},{pid},{started.isoformat()}\n"
            os.write(fd, line.encode())
        if args.plain_delay:
            await asyncio.sleep(args.plain_delay)

    try:
        run_process(app)
    finally:
        if fd is not None:
            os.close(fd)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("worker")
    w.add_argument("--url", required=True)
    w.add_argument("--namespace", default="ns")
    w.add_argument("--delay", type=float, default=0.0)
    w.add_argument("--plain-delay", type=float, default=0.0)
    w.add_argument("--log")
    w.add_argument("--idle-log")
    w.add_argument("--started-log")
    w.add_argument("--fail-first", action="store_true")
    w.add_argument("--concurrency", type=int, default=100)
    w.add_argument("--batch-size", type=int, default=500)
    w.add_argument("--lease", type=float, default=30.0)
    w.add_argument("--heartbeat", type=float, default=10.0)
    w.add_argument("--rescue-interval", type=float, default=5.0)
    w.add_argument("--recheck", type=float, default=30.0)
    w.add_argument("--backoff-base", type=float, default=2.0)
    w.add_argument("--shutdown-grace", type=float, default=30.0)
    args = parser.parse_args()
    return worker(args)


if __name__ == "__main__":
    raise SystemExit(main())
