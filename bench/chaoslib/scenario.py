"""One chaos run, start to verdict: reference clock, workers, producer, faults, drain, check.

:func:`run` takes the store's URL (and, for database restarts, the private cluster that
serves it); :func:`run_skew_scenario` is a short run with one worker per clock skew and no
other fault, for tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from bench.chaoslib.classify import Report, classify
from bench.chaoslib.faults import (
    PG_ONLY,
    ROOT,
    Injector,
    WorkerPool,
    faketime_problem,
    now_us,
    with_params,
)
from bench.chaoslib.records import read_acks, read_starts
from bench.chaoslib.tables import StoreTables, kind_of
from bench.chaoslib.worker import NAMESPACE

from duetime import AsyncApp


class Restartable(Protocol):
    """The private PostgreSQL cluster (tests/integration/pg_cluster.py's PgCluster)."""

    def stop(self, mode: str = "fast") -> None: ...
    def start(self, timeout: float = 30.0) -> None: ...


@dataclass(slots=True)
class ChaosConfig:
    """What to run; every duration in seconds."""

    workers: int = 3
    duration: float = 30.0
    rate: float = 100.0
    faults: frozenset[str] = frozenset({"kill", "stop"})
    skew: float = 120.0
    skews: list[float] | None = None
    """Each worker's clock skew; by default from ``skew`` when ``faults`` has ``skew``."""
    seed: int = 0
    lease: float = 4.0
    handler_seconds: float = 0.01
    horizon: float = 8.0
    expires_after: float = 20.0
    fault_every: float = 2.0
    drain_timeout: float = 120.0
    concurrency: int = 50
    batch_size: int = 100
    sync_handlers: bool = False
    """Plain ``def`` handlers (run in threads) instead of ``async`` ones."""
    raise_every: int = 50
    """With the ``raise`` fault: the first attempt of every this-many-th timer raises
    ``SystemExit``, ``KeyboardInterrupt`` or a bare ``BaseException`` in its handler."""
    planned: list[tuple[float, str, Callable[[], str]]] = field(default_factory=list)
    """Faults at set moments: (seconds into production, kind, action returning its target)."""
    keep: Path | None = None
    """Keep the run's record files and worker logs in this folder."""
    log: list[str] = field(default_factory=list)

    def worker_skews(self) -> list[float]:
        if self.skews is not None:
            return list(self.skews)
        if "skew" not in self.faults:
            return [0.0] * self.workers
        pattern = [self.skew, -self.skew]
        return [pattern[i] if i < 2 else 0.0 for i in range(self.workers)]


def run(config: ChaosConfig, url: str, cluster: Restartable | None = None) -> Report:
    """Run ``config`` against the store at ``url`` and classify every acknowledged timer."""
    skews = config.worker_skews()
    if any(skews) and (problem := faketime_problem()):
        raise RuntimeError(problem)
    folder = Path(tempfile.mkdtemp(prefix="duetime-chaos-"))
    try:
        with _reference_clock(folder) as clock:
            return _run(config, url, cluster, folder, clock, skews)
    finally:
        if config.keep is not None:
            shutil.copytree(
                folder, config.keep, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.sock")
            )
        shutil.rmtree(folder, ignore_errors=True)


def _run(
    config: ChaosConfig,
    url: str,
    cluster: Restartable | None,
    folder: Path,
    clock: str,
    skews: list[float],
) -> Report:
    rng = random.Random(config.seed)
    asyncio.run(_prepare(url))
    options = [
        "--lease", str(config.lease), "--handler-seconds", str(config.handler_seconds),
        "--concurrency", str(config.concurrency), "--batch-size", str(config.batch_size),
    ]  # fmt: skip
    if config.sync_handlers:
        options.append("--sync-handlers")
    if "raise" in config.faults:
        options += ["--raise-every", str(config.raise_every)]
    pool = WorkerPool(url, folder, clock, skews, options)
    faults = config.faults if kind_of(url) == "postgres" else config.faults - PG_ONLY
    injector = Injector(
        pool, faults, rng, config.lease, config.fault_every,
        restart_db=_restarter(cluster) if cluster is not None else None,
        drop_connections=lambda: _drop_connections(url),
        planned=config.planned,
    )  # fmt: skip
    tables = StoreTables(url)
    producer: subprocess.Popen[bytes] | None = None
    try:
        pool.start_all()
        asyncio.run(_wait_for_nodes(url, len(skews)))
        producer = _start_producer(config, url, folder)
        running = producer
        _wait_for_first_ack(producer, folder)
        injector.run(config.duration, alive=lambda: running.poll() is None)
        if producer.wait(timeout=config.duration + 120) != 0:
            raise RuntimeError(f"the producer failed:\n{_tail(folder / 'producer.stderr')}")
        drained = _drain(tables, config.drain_timeout)
        config.log.append(f"drained in {drained:.1f} s" if drained >= 0 else "drain timed out")
    finally:
        if producer is not None and producer.poll() is None:
            producer.kill()
        pool.stop_all()
    checked_us = now_us()
    report = classify(
        read_acks(folder),
        read_starts(folder),
        tables.timers(),
        tables.attempts(),
        pool.fates,
        injector.events,
        checked_us,
    )
    config.log.append(pool.stderr())
    return report


def run_skew_scenario(
    store_url: str,
    skews: list[float] | None = None,
    timers: int = 300,
    handler_seconds: float | None = None,
    lease: float = 2.0,
    seed: int = 0,
) -> Report:
    """One worker per clock skew (default +120 s and -120 s) on ``store_url``, ``timers``
    timers due over the next few seconds, handlers that outlast the lease (``lease * 1.5``
    by default, so heartbeats must renew them), no other fault; drained and classified."""
    config = ChaosConfig(
        workers=len(skews or [120.0, -120.0]),
        skews=list(skews or [120.0, -120.0]),
        duration=2.0,
        rate=timers / 2.0,
        faults=frozenset(),
        seed=seed,
        lease=lease,
        handler_seconds=lease * 1.5 if handler_seconds is None else handler_seconds,
        horizon=4.0,
        drain_timeout=60.0,
        concurrency=timers,
        batch_size=100,
    )
    return run(config, store_url)


# -- pieces -------------------------------------------------------------------------------------
@contextlib.contextmanager
def _reference_clock(folder: Path) -> Iterator[str]:
    path = str(folder / "clock.sock")
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.chaoslib.refclock", path], cwd=ROOT, env=_env()
    )
    try:
        deadline = time.monotonic() + 20
        while not Path(path).exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the reference clock did not start")
            time.sleep(0.02)
        yield path
    finally:
        proc.kill()
        proc.wait()


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), *sys.path)))}


async def _prepare(url: str) -> None:
    """Migrate the store and make the namespace before any worker races to."""
    async with AsyncApp(url, NAMESPACE) as app:
        await app.timers.counts()


async def _wait_for_nodes(url: str, count: int, within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    seen: set[str] = set()
    async with AsyncApp(url, NAMESPACE) as app:
        while len(seen) < count:
            seen |= {n.id for n in await app.nodes() if n.id.startswith("w")}
            if time.monotonic() > deadline:
                raise RuntimeError(f"{count} workers did not register within {within} s")
            await asyncio.sleep(0.1)


def _start_producer(config: ChaosConfig, url: str, folder: Path) -> subprocess.Popen[bytes]:
    command = [
        sys.executable, "-m", "bench.chaoslib.producer",
        "--url", with_params(url, application_name="chaos-producer"),
        "--records", str(folder), "--rate", str(config.rate),
        "--duration", str(config.duration), "--horizon", str(config.horizon),
        "--expires-after", str(config.expires_after), "--seed", str(config.seed),
    ]  # fmt: skip
    with (folder / "producer.stderr").open("wb") as stderr:
        return subprocess.Popen(command, cwd=ROOT, env=_env(), stderr=stderr)


def _wait_for_first_ack(producer: subprocess.Popen[bytes], folder: Path) -> None:
    """Return once the producer has a batch acknowledged: the faults' moments count from
    there, not from its start, which a busy machine delays by seconds (a fault planned for
    the third second of production then fell before any timer was stored)."""
    acks = folder / "acks-producer.log"
    deadline = time.monotonic() + 300  # a bound for a producer that hangs, not a guess
    while not (acks.exists() and acks.stat().st_size > 0):
        if producer.poll() is not None:
            raise RuntimeError(f"the producer failed:\n{_tail(folder / 'producer.stderr')}")
        if time.monotonic() > deadline:
            raise RuntimeError("the producer stored no batch in 300 s")
        time.sleep(0.02)


def _drain(tables: StoreTables, timeout: float) -> float:
    """Seconds until nothing of the run is pending or running (-1: ``timeout`` passed)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        with contextlib.suppress(Exception):  # the database may still be starting
            if tables.unfinished() == 0:
                return time.monotonic() - started
        time.sleep(0.2)
    return -1.0


def _restarter(cluster: Restartable) -> Any:
    def restart(mode: str, down: float) -> None:
        cluster.stop(mode)
        time.sleep(down)
        cluster.start()

    return restart


def _drop_connections(url: str) -> int:
    if kind_of(url) != "postgres":
        return 0
    import psycopg

    from duetime.postgres import conninfo

    sql = (
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
        "WHERE application_name LIKE 'chaos-w%'"
    )
    try:
        with psycopg.connect(conninfo(url), autocommit=True, connect_timeout=5) as conn:
            row = conn.execute(sql).fetchone()
    except psycopg.Error:
        return 0
    return int(row[0]) if row else 0


def _tail(path: Path) -> str:
    try:
        return path.read_text(errors="replace")[-3000:]
    except OSError:
        return ""
