"""The event bus: emit → Python handler and emit → NATS JetStream, on SQLite and PostgreSQL.

Run by hand (not part of the test suite)::

    .venv/bin/python bench/bus_bench.py                          # both backends, ~5 minutes
    .venv/bin/python bench/bus_bench.py --events 5000 --backends sqlite

For each backend, on a fresh database (a temporary SQLite file; a PostgreSQL schema of its own,
dropped afterwards), a node runs in a process of its own, as in production, and this process
emits to it:

- throughput: ``--events`` events (default 20,000) emitted by ``--producers`` concurrent
  producers with one ``emit()`` call each (one transaction per event), and again emitted in
  batches (``schedule_many`` of events due now, ``--batch`` per transaction); the rate is
  events ÷ (first emit → the database shows every event done). For a Python handler (a no-op
  coroutine) done means its outcome is committed; for NATS, that the JetStream stream holds
  every message, i.e. the broker acknowledged each publish (the database's own "all done" is
  printed beside it).
- latency: ``--latency-events`` events (default 2,000) emitted one at a time every
  1/``--latency-rate`` s (default 200/s); each carries the wall clock read just before its
  ``emit()``, and the handler records how long after that it started: p50 / p99 / max, in ms.

The 1-minute load average is printed with the figures: the rates move with the neighbours.
See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats
import nats.js.errors
import psycopg
from nats.aio.client import Client
from psycopg import sql

from duetime import AsyncApp, Event, Status, TimerRequest
from duetime.destinations.nats import NatsDestination

NAMESPACE = "bench"
HANDLER_TYPE = "bench.handler"
NATS_TYPE = "bench.nats"
LATENCY_TYPE = "bench.latency"
WARM_UP = 200
"""Events emitted and handled before each measurement: connections, pools and plans warm."""
POLL = 0.01
KINDS = {"handler": HANDLER_TYPE, "nats": NATS_TYPE, "latency": LATENCY_TYPE}


# -- the report ----------------------------------------------------------------------------------
@dataclass
class Table:
    """One backend's figures, printed as they come and as a Markdown table at the end."""

    title: str
    rows: list[tuple[str, str, str]] = field(default_factory=list)

    def add(self, measure: str, result: str, how: str = "") -> None:
        self.rows.append((measure, result, how))
        print(f"  {measure:<44} {result:>26}  {how}", flush=True)

    def markdown(self) -> str:
        lines = [f"**{self.title}**", "", "| measure | result | how |", "|---|---:|---|"]
        lines += [f"| {m} | {r} | {h} |" for m, r, h in self.rows]
        return "\n".join(lines)


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.2f} (5-min {five:.2f})"


# -- databases -----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Database:
    """A fresh database for one measurement, and how to throw it away."""

    url: str
    drop: Callable[[], None]


def fresh_database(backend: str, tmp: Path, pg_url: str) -> Database:
    tag = uuid.uuid4().hex[:10]
    if backend == "sqlite":
        path = tmp / f"bus-{tag}.db"

        def remove() -> None:
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    Path(f"{path}{suffix}").unlink()

        return Database(f"sqlite:///{path}", remove)
    schema = f"dtbench_bus_{tag}"

    def drop_schema() -> None:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))

    separator = "&" if "?" in pg_url else "?"
    return Database(f"{pg_url}{separator}schema={schema}", drop_schema)


@contextlib.contextmanager
def database(backend: str, tmp: Path, pg_url: str) -> Iterator[str]:
    db = fresh_database(backend, tmp, pg_url)
    try:
        yield db.url
    finally:
        db.drop()


# -- NATS ----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Stream:
    """A JetStream stream of the run's own, capturing ``<prefix>.>``."""

    url: str
    name: str
    prefix: str

    @classmethod
    def fresh(cls, url: str) -> Stream:
        tag = uuid.uuid4().hex[:10]
        return cls(url, f"DTBENCH_BUS_{tag.upper()}", f"dtbench.bus.{tag}")

    async def create(self) -> None:
        nc = await nats.connect(self.url)
        try:
            await nc.jetstream().add_stream(name=self.name, subjects=[f"{self.prefix}.>"])
        finally:
            await nc.close()

    async def delete(self) -> None:
        nc = await nats.connect(self.url)
        try:
            with contextlib.suppress(nats.js.errors.NotFoundError):
                await nc.jetstream().delete_stream(self.name)
        finally:
            await nc.close()


class StreamCounter:
    """Reads how many messages the stream holds: each one a publish JetStream acknowledged."""

    def __init__(self, stream: Stream) -> None:
        self.stream = stream
        self._nc: Client | None = None

    async def __aenter__(self) -> StreamCounter:
        self._nc = await nats.connect(self.stream.url)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._nc is not None:
            await self._nc.close()

    async def count(self) -> int:
        assert self._nc is not None
        info = await self._nc.jetstream().stream_info(self.stream.name)
        return int(info.state.messages)


# -- the node: a worker in its own process -------------------------------------------------------
class Node:
    """``bus_bench.py --child …``: one worker process, started and ready, then stopped."""

    def __init__(self, url: str, kind: str, out: Path, stream: Stream | None = None) -> None:
        command = [sys.executable, __file__, "--child", kind, "--child-url", url]
        command += ["--child-out", str(out)]
        if stream is not None:
            command += ["--nats-url", stream.url, "--child-subject", f"{stream.prefix}.{{type}}"]
        self.out = out
        out.unlink(missing_ok=True)  # never read an earlier run's figures as this one's
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # "ready" once it is registered and sleeping
        if line.strip() != b"ready":
            self.proc.kill()
            raise RuntimeError(f"the node did not start: {line!r}")

    def stop(self) -> dict[str, Any] | None:
        """Stop it (in-flight work finishes) and return what it wrote to ``out``: the handler's
        latencies, the CPU seconds it used once ready and how many outcomes it had."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if not self.out.exists():
            return None
        written: dict[str, Any] = json.loads(self.out.read_text())
        return written


def child(args: argparse.Namespace) -> None:
    """The node: a no-op handler, a recording handler, or a route to NATS; never SQL."""
    kind: str = args.child
    app = AsyncApp(args.child_url, NAMESPACE)
    latencies: list[float] = []
    if kind == "handler":

        @app.handler(HANDLER_TYPE)
        async def noop(event: Event) -> None:
            return None

    elif kind == "latency":

        @app.handler(LATENCY_TYPE)
        async def record(event: Event) -> None:
            latencies.append((time.time() - float(event.payload["sent"])) * 1000)

    else:
        app.route(NATS_TYPE, to=NatsDestination("bus", args.nats_url, args.child_subject))
    node_id = f"bench-{socket.gethostname()}-{os.getpid()}"

    async def main() -> None:
        await app.open()
        worker = app.worker(node_id=node_id)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, worker.stop)
        task = asyncio.create_task(worker.run())

        async def registered() -> bool:
            return any(n.id == node_id for n in await app.nodes())

        await until(registered, 60, "the node's registration")
        print("ready", flush=True)
        cpu = time.process_time()
        await task
        usage["cpu"] = time.process_time() - cpu
        usage["handled"] = worker.stats.total()
        await app.close()

    usage: dict[str, float] = {}
    asyncio.run(main())
    Path(args.child_out).write_text(json.dumps({"latencies": latencies, **usage}))


# -- emitting ------------------------------------------------------------------------------------
async def emit_each(app: AsyncApp, type: str, n: int, producers: int, tag: str) -> None:
    """``n`` events, one ``emit()`` (one transaction) each, from concurrent producers."""
    next_index = iter(range(n))

    async def producer() -> None:
        for i in next_index:
            await app.emit(type, {"i": i}, key=f"{tag}-{i}")

    await asyncio.gather(*(producer() for _ in range(producers)))


async def emit_batches(app: AsyncApp, type: str, n: int, batch: int, tag: str) -> None:
    """``n`` events due now, stored ``batch`` to a transaction."""
    for start in range(0, n, batch):
        requests = [
            TimerRequest(type, {"i": i}, delay=0, key=f"{tag}-{i}")
            for i in range(start, min(n, start + batch))
        ]
        await app.timers.schedule_many(requests, on_conflict="keep")


async def until(check: Callable[[], Awaitable[bool]], within: float, what: str) -> float:
    """Poll ``check`` until it holds; the wall-clock time it first did. TimeoutError if never."""
    deadline = time.monotonic() + within
    while not await check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not reached within {within:g} s")
        await asyncio.sleep(POLL)
    return time.time()


async def all_done(app: AsyncApp, n: int) -> bool:
    return (await app.timers.counts())[Status.DONE] >= n


@dataclass(frozen=True, slots=True)
class Options:
    events: int
    producers: int
    batch: int
    latency_events: int
    latency_rate: float
    timeout: float
    modes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Throughput:
    """One throughput run: events/s end to end and while emitting, and the node's CPU."""

    rate: float
    emit_rate: float
    done_rate: float
    """By the database's "all done" (for a Python handler the same as ``rate``)."""
    node_cpu_us: float | None
    """The node process's CPU per event handled, once ready: rates move with the neighbours'
    load, this much less."""
    emit_cpu_us: float
    """This process's CPU per event while emitting (validating, encoding, committing)."""


# -- the measurements ----------------------------------------------------------------------------
async def throughput(
    url: str, kind: str, mode: str, options: Options, stream: Stream | None, tmp: Path
) -> Throughput:
    """Emit ``options.events`` to a node of ``kind`` and time them until done (or acked)."""
    type = KINDS[kind]
    n = options.events
    app = AsyncApp(url, NAMESPACE)
    await app.open()
    node = Node(url, kind, tmp / f"{kind}-{mode}.json", stream)
    try:
        async with contextlib.AsyncExitStack() as stack:
            counter = await stack.enter_async_context(StreamCounter(stream)) if stream else None
            await emit_batches(app, type, WARM_UP, WARM_UP, "warm")
            await until(lambda: all_done(app, WARM_UP), options.timeout, "warm-up")
            started = time.time()
            emit_cpu = time.process_time()
            if mode == "single":
                await emit_each(app, type, n, options.producers, "e")
            else:
                await emit_batches(app, type, n, options.batch, "e")
            emitted = time.time()
            emit_cpu = time.process_time() - emit_cpu
            total = WARM_UP + n
            acked = None
            if counter is not None:
                acked = await until(
                    lambda: _holds(counter, total), options.timeout, "JetStream acks"
                )
            done = await until(lambda: all_done(app, total), options.timeout, "all done")
    finally:
        usage = node.stop()
        await app.close()
    cpu_us = None
    if usage and usage.get("handled"):
        cpu_us = usage["cpu"] / usage["handled"] * 1e6
    return Throughput(
        n / ((acked or done) - started),
        n / (emitted - started),
        n / (done - started),
        cpu_us,
        emit_cpu / n * 1e6,
    )


async def _holds(counter: StreamCounter, n: int) -> bool:
    return await counter.count() >= n


async def latency(url: str, options: Options, tmp: Path) -> tuple[list[float], list[float]]:
    """Handler start minus the wall clock just before ``emit()``, in ms, for a paced stream;
    and how long each ``emit()`` call took (its durable commit), the first part of that."""
    app = AsyncApp(url, NAMESPACE)
    await app.open()
    node = Node(url, "latency", tmp / "latency.json")
    n = options.latency_events
    try:
        gap = 1 / options.latency_rate
        for i in range(min(WARM_UP, n)):  # warm, unrecorded by the summary below
            await app.emit(LATENCY_TYPE, {"sent": time.time()}, key=f"warm-{i}")
        await until(lambda: all_done(app, min(WARM_UP, n)), options.timeout, "warm-up")
        begin = time.monotonic()
        emits: list[float] = []
        for i in range(n):
            wait = begin + i * gap - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            sent = time.time()
            await app.emit(LATENCY_TYPE, {"sent": sent}, key=f"l-{i}")
            emits.append((time.time() - sent) * 1000)
        await until(lambda: all_done(app, min(WARM_UP, n) + n), options.timeout, "all done")
    finally:
        result = node.stop()
        await app.close()
    recorded: list[float] = result["latencies"] if result else []
    return recorded[min(WARM_UP, n) :], emits


def run_backend(backend: str, options: Options, args: argparse.Namespace, tmp: Path) -> Table:
    label = "SQLite" if backend == "sqlite" else "PostgreSQL"
    load_at_start = load()
    table = Table(label)
    print(f"\n{label}", flush=True)
    n = options.events
    how = {
        "single": f"{n:,} events, `emit()` one each, {options.producers} producers",
        "batch": f"{n:,} events emitted {options.batch} to a transaction",
    }
    for mode in options.modes:
        with database(backend, tmp, args.pg_url) as url:
            run = asyncio.run(throughput(url, "handler", mode, options, None, tmp))
        table.add(
            f"emit → Python handler ({mode})",
            f"{run.rate:,.0f} events/s",
            f"{how[mode]} (emitting: {run.emit_rate:,.0f}/s); first emit → all done; " + _cpu(run),
        )
    with database(backend, tmp, args.pg_url) as url:
        late, emits = asyncio.run(latency(url, options, tmp))
    if late:
        q = statistics.quantiles(late, n=100, method="inclusive")
        commit = statistics.quantiles(emits, n=100, method="inclusive")
        table.add(
            "emit → handler start, latency p50 / p99",
            f"{q[49]:.2f} / {q[98]:.2f} ms",
            f"{len(late):,} events, {options.latency_rate:g}/s, one at a time; max "
            f"{max(late):.1f} ms; of which `emit()` itself (its commit) p50 "
            f"{commit[49]:.2f} / p99 {commit[98]:.2f} ms",
        )
    for mode in options.modes if args.nats else ():
        stream = Stream.fresh(args.nats_url)
        asyncio.run(stream.create())
        try:
            with database(backend, tmp, args.pg_url) as url:
                run = asyncio.run(throughput(url, "nats", mode, options, stream, tmp))
        finally:
            asyncio.run(stream.delete())
        table.add(
            f"emit → NATS JetStream, acked ({mode})",
            f"{run.rate:,.0f} events/s",
            f"{how[mode]} (emitting: {run.emit_rate:,.0f}/s); first emit → stream holds all "
            f"(all done in the database: {run.done_rate:,.0f}/s); " + _cpu(run),
        )
    table.title = (
        f"{label} — 1-minute load average {load_at_start} at the start, {load()} at the end"
    )
    return table


def _cpu(run: Throughput) -> str:
    emitting = f"emitting CPU {run.emit_cpu_us:.0f} µs/event"
    if run.node_cpu_us is None:
        return f"node CPU unknown; {emitting}"
    return f"node CPU {run.node_cpu_us:.0f} µs/event; {emitting}"


def fsync_latency(directory: Path) -> str:
    """fdatasync p50 / p99 in ``directory``: every emit and every claim waits for one, so on a
    busy disk this, not duetime, sets the latency floor."""
    path = directory / "fsync-probe"
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    times = []
    try:
        for i in range(200):
            os.pwrite(fd, b"x" * 4096, (i % 16) * 4096)
            started = time.perf_counter()
            os.fdatasync(fd)
            times.append((time.perf_counter() - started) * 1000)
    finally:
        os.close(fd)
        path.unlink()
    q = statistics.quantiles(times, n=100, method="inclusive")
    return f"fdatasync p50 {q[49]:.2f} ms / p99 {q[98]:.2f} ms"


# -- main ----------------------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--backends", default="sqlite,postgres", help="sqlite,postgres")
    parser.add_argument("--events", type=int, default=20_000, help="per throughput run")
    parser.add_argument("--producers", type=int, default=8, help="concurrent emit() callers")
    parser.add_argument("--batch", type=int, default=500, help="events a batched transaction")
    parser.add_argument("--modes", default="single,batch", help="single,batch")
    parser.add_argument("--latency-events", type=int, default=2_000)
    parser.add_argument("--latency-rate", type=float, default=200.0, help="events/s")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a wait may take")
    parser.add_argument(
        "--pg-url",
        default=os.environ.get("DUETIME_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test"),
    )
    parser.add_argument(
        "--nats-url",
        default=os.environ.get("DUETIME_TEST_NATS", "nats://127.0.0.1:4222"),
    )
    parser.add_argument(
        "--no-nats",
        dest="nats",
        action="store_false",
        help="skip the NATS JetStream rows",
    )
    parser.add_argument("--child", choices=sorted(KINDS), help=argparse.SUPPRESS)
    parser.add_argument("--child-url", help=argparse.SUPPRESS)
    parser.add_argument("--child-out", help=argparse.SUPPRESS)
    parser.add_argument("--child-subject", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    options = Options(
        args.events,
        args.producers,
        args.batch,
        args.latency_events,
        args.latency_rate,
        args.timeout,
        tuple(m for m in args.modes.split(",") if m),
    )
    command = " ".join(shlex.quote(a) for a in [".venv/bin/python", *sys.argv])
    print(f"$ {command}")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {load()}")
    tables = []
    with tempfile.TemporaryDirectory(prefix="duetime-bus-bench-") as name:
        disk = fsync_latency(Path(name))
        print(f"this machine's disk right now: {disk}", flush=True)
        for backend in args.backends.split(","):
            tables.append(run_backend(backend, options, args, Path(name)))
    print(f"\n$ {command}\n{os.cpu_count()} CPUs; at the start, {disk}\n")
    for table in tables:
        print(table.markdown(), end="\n\n")


if __name__ == "__main__":
    main()
