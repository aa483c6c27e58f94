"""Celery on Redis: ``apply_async(eta=…)`` to enqueue, ``celery -A peers.celery_peer worker``.

Not durable the way the PostgreSQL systems are: Redis holds an ETA task only until a worker
fetches it, and from then on the task waits in that worker's memory until its instant (a
worker that dies loses its place in line to Redis' visibility timeout, one hour by default,
and a task due further out than the timeout is delivered again). Compared for lateness and
idle cost only.

The worker is the ``celery`` command in a process of its own, with the ``threads`` pool
(``--pool threads --concurrency N``: one process, so the shared counter and the lateness list
need no cross-process care). The task records ``start - eta`` in that process and writes the
list to a file when the worker shuts down; the bench child that started the worker hands it on
(:meth:`Celery.recorded_elsewhere`). Broker: ``PG_BENCH_CELERY_REDIS`` (default
``redis://127.0.0.1:6379/13``), a database of its own that ``install`` flushes — only it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import mmap
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from celery import Celery as CeleryApp
from celery import signals

from peers import JOB_TYPE, Record, System, chunks

BROKER = os.environ.get("PG_BENCH_CELERY_REDIS", "redis://127.0.0.1:6379/13")
QUEUE = "dtbench"
START_TIMEOUT = 60.0

app = CeleryApp("dtbench", broker=BROKER)
app.conf.update(
    task_default_queue=QUEUE,
    task_ignore_result=True,
    worker_hijack_root_logger=False,
    broker_connection_retry_on_startup=True,
)

_late: list[float] = []
_counter: list[Any] = []


def _count() -> None:
    if not _counter:
        path, slot = os.environ.get("DTBENCH_CELERY_COUNTER"), os.environ.get("DTBENCH_CELERY_SLOT")
        if not path or slot is None:
            _counter.append(None)
        else:
            fd = os.open(path, os.O_RDWR)
            _counter.append((memoryview(mmap.mmap(fd, 0)).cast("q"), int(slot)))
    if _counter[0] is not None:
        counts, slot = _counter[0]
        counts[slot] += 1  # the thread pool's threads take turns under the GIL


@app.task(name=JOB_TYPE)
def noop(due: float | None) -> None:
    """The no-op task: lateness is start minus the ETA it was given."""
    if due is not None:
        _late.append((time.time() - due) * 1000)
    _count()


@signals.worker_ready.connect
def _ready(**_: Any) -> None:
    marker = os.environ.get("DTBENCH_CELERY_READY")
    if marker:
        Path(marker).touch()


@signals.worker_shutdown.connect
def _shutdown(**_: Any) -> None:
    out = os.environ.get("DTBENCH_CELERY_OUT")
    if out:
        Path(out).write_text(json.dumps(_late))


def die_with_parent() -> None:
    """In the celery worker before it starts: SIGTERM it when the bench child dies (Linux)."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def wait_ready(proc: subprocess.Popen[bytes], marker: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while not marker.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"celery worker did not start (exit {proc.returncode})")
        time.sleep(0.05)


class Celery(System):
    name = "celery"
    label = "Celery"
    remaining_sql = ""  # not a PostgreSQL system: the bench counts handled tasks instead
    uses_postgres = False

    def __init__(self, base: str) -> None:
        super().__init__(base)
        self._out: Path | None = None

    def describe(self) -> str:
        from importlib.metadata import version

        return (
            f"Celery {version('celery')} (redis {version('redis')}, broker {BROKER}, "
            "worker --pool threads)"
        )

    def redis(self) -> Any:
        import redis

        return redis.Redis.from_url(BROKER)

    async def install(self, db: str) -> None:
        client = self.redis()
        try:
            client.flushdb()  # this broker database only
        finally:
            client.close()

    async def enqueue(self, db: str, dues: Sequence[float | None]) -> None:
        with app.producer_or_acquire() as producer:  # one connection for every send
            for chunk in chunks(dues):
                for due in chunk:
                    eta = None if due is None else datetime.fromtimestamp(due, UTC)
                    noop.apply_async((due,), eta=eta, producer=producer)

    async def run_worker(
        self,
        db: str,
        *,
        concurrency: int,
        batch_size: int,
        record: Record,
        ready: Callable[[], None],
        go: asyncio.Event,
        stop: asyncio.Event,
    ) -> None:
        proc, marker = await asyncio.to_thread(self._start, concurrency)
        try:
            await asyncio.to_thread(wait_ready, proc, marker)
            ready()
            await go.wait()
            await stop.wait()
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)  # warm shutdown: writes the lateness file
            await asyncio.to_thread(proc.wait)
            await asyncio.to_thread(marker.unlink, missing_ok=True)

    def _start(self, concurrency: int) -> tuple[subprocess.Popen[bytes], Path]:
        """Start ``celery worker``; (the process, the file it touches when ready)."""
        counter, slot = os.environ["DTBENCH_COUNTER"], os.environ["DTBENCH_SLOT"]
        here = Path(__file__).resolve().parent.parent
        self._out = Path(f"{counter}.{slot}.celery.json")
        marker = Path(f"{counter}.{slot}.celery.ready")
        marker.unlink(missing_ok=True)
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(here), os.environ.get("PYTHONPATH")])),
            "DTBENCH_CELERY_COUNTER": counter,
            "DTBENCH_CELERY_SLOT": slot,
            "DTBENCH_CELERY_OUT": str(self._out),
            "DTBENCH_CELERY_READY": str(marker),
        }
        command = [
            str(Path(sys.executable).parent / "celery"),
            "-A",
            "peers.celery_peer",
            "worker",
            "--pool",
            "threads",
            "--concurrency",
            str(concurrency),
            "--queues",
            QUEUE,
            "--loglevel",
            "WARNING",
            "--without-gossip",
            "--without-mingle",
        ]
        proc = subprocess.Popen(  # its stdout is the bench child's: it must say only "ready"
            command,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=sys.stderr,
            preexec_fn=die_with_parent,
        )
        return proc, marker

    def recorded_elsewhere(self) -> list[float]:
        if self._out is None or not self._out.exists():
            return []
        return list(json.loads(self._out.read_text()))
