"""duetime's REST API under load: timers created over HTTP while the worker fires them.

Run by hand (not part of the test suite)::

    .venv/bin/python bench/api_bench.py                    # 3000 requests at 1, 8, 32 clients
    .venv/bin/python bench/api_bench.py --requests 500     # quicker
    .venv/bin/python bench/api_bench.py --auth             # every request carries a bearer token
    .venv/bin/python bench/api_bench.py --backend postgres # a schema of its own, dropped after
    .venv/bin/python bench/api_bench.py --backend postgres --clients 32 --wrk 10 --floor 3

With ``--floor ROUNDS`` a minimal FastAPI + database endpoint (:data:`FLOOR_MODULE`) serves the
same bodies on the same path, and the rounds alternate floor, duetime, floor, duetime: each
prints both servers' CPU time a request and their ratio (duetime / floor), the floor being what
any FastAPI app that stores the request costs on this machine at this moment.

Starts ``duetime serve --app <module>:app`` (one process: API + worker) on a fresh database: a
SQLite file (WAL, ``synchronous=FULL``) in a temporary directory, or a PostgreSQL schema
``dtbench_api_<random>`` of ``--pg-url`` (``synchronous_commit=on``). Each phase runs N concurrent
clients (one keep-alive connection each) that POST timers due 0-2 s later, so the worker claims
and fires while the API is writing. It reports requests/s, latency percentiles, and how many of
the timers had fired (and how late) when the phase ended and a little later, with the 1-minute
load average at the start and end of each phase (the machine may be shared) and the server
process's CPU time a request (which the neighbours move much less than the rate).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

APP_MODULE = """
from duetime import AsyncApp

app = AsyncApp(namespace="bench")


@app.handler("bench.fire")
async def fire(event):
    return None
"""


FLOOR_MODULE = r"""
# The floor: what any FastAPI app that validates this body and stores one row costs a request.
# Served like `duetime serve` serves its API: uvicorn, httptools, uvloop, one process, no
# access log, no server header, the same collector pacing (duetime/support/gc_tuning.py).
import asyncio
import datetime as dt
import gc
import sqlite3
import sys
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any

import uvicorn
import uvloop
from fastapi import FastAPI
from pydantic import BaseModel, Field
from starlette.responses import JSONResponse

port, backend, target = int(sys.argv[1]), sys.argv[2], sys.argv[3]


class TimerIn(BaseModel):
    type: str = Field(min_length=1, max_length=200)
    payload: dict[str, Any] | None = None
    at: dt.datetime | None = None
    delay: float | None = Field(default=None, ge=0)
    key: str | None = Field(default=None, min_length=1, max_length=200)
    subject: str | None = Field(default=None, max_length=200)


INSERT = (
    "INSERT INTO floor_timers (namespace, key, type, subject, payload, due_at)"
    " VALUES ({0}, {0}, {0}, {0}, {0}, {0}) RETURNING id"
)

if backend == "postgres":
    from psycopg.types.json import Jsonb
    from psycopg_pool import AsyncConnectionPool

    pool = AsyncConnectionPool(target, min_size=1, max_size=10, open=False)
    PG_INSERT = INSERT.format("%s")

    async def insert(row: tuple[Any, ...]) -> int:
        async with pool.connection() as conn:  # commits on leaving
            cursor = await conn.execute(PG_INSERT, (*row[:4], Jsonb(row[4]), row[5]))
            (found,) = await cursor.fetchone()
            return found

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        await pool.open(wait=True)
        async with pool.connection() as conn:
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS floor_timers (id bigserial PRIMARY KEY,"
                " namespace text NOT NULL, key text, type text NOT NULL, subject text,"
                " payload jsonb, due_at timestamptz NOT NULL, UNIQUE (namespace, key))"
            )
        yield
        await pool.close()

else:
    import json

    lane = ThreadPoolExecutor(max_workers=1)  # one connection, one writer
    db: sqlite3.Connection | None = None
    LITE_INSERT = INSERT.format("?")

    def _insert(row: tuple[Any, ...]) -> int:
        assert db is not None
        found = db.execute(
            LITE_INSERT, (*row[:4], json.dumps(row[4]), row[5].isoformat())
        ).fetchone()[0]
        db.commit()
        return found

    async def insert(row: tuple[Any, ...]) -> int:
        return await asyncio.get_running_loop().run_in_executor(lane, _insert, row)

    def _open() -> None:
        global db
        db = sqlite3.connect(target, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute(
            "CREATE TABLE IF NOT EXISTS floor_timers (id INTEGER PRIMARY KEY,"
            " namespace TEXT NOT NULL, key TEXT, type TEXT NOT NULL, subject TEXT,"
            " payload TEXT, due_at TEXT NOT NULL, UNIQUE (namespace, key))"
        )

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        await asyncio.get_running_loop().run_in_executor(lane, _open)
        yield


app = FastAPI(lifespan=lifespan)


@app.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@app.post("/v1/namespaces/{namespace}/timers", status_code=201)
async def create(namespace: str, body: TimerIn) -> JSONResponse:
    now = dt.datetime.now(dt.timezone.utc)
    due = body.at if body.at is not None else now + dt.timedelta(seconds=body.delay or 0)
    row = (namespace, body.key, body.type, body.subject, body.payload, due)
    found = await insert(row)
    answer = {"id": found, "key": body.key, "type": body.type, "due_at": due.isoformat()}
    return JSONResponse(answer, 201)


config = uvicorn.Config(
    app,
    host="127.0.0.1",
    port=port,
    log_level="warning",
    access_log=False,
    lifespan="on",
    server_header=False,
    http="httptools",
)
gc.collect()
gc.freeze()
gc.set_threshold(50_000, 20, 20)
with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
    runner.run(uvicorn.Server(config).serve())
"""
"""The floor server (``--floor``): argv is its port, ``sqlite`` or ``postgres``, and the
SQLite file or the PostgreSQL URL (a schema of its own on its search path)."""


@dataclass
class Phase:
    clients: int
    requests: int
    seconds: float
    latencies: list[float]
    errors: int
    done_at_end: int
    done_later: int
    lateness_p50: float | None
    lateness_p99: float | None
    load: str = field(default="")
    server_cpu_us: float | None = None
    worker_cpu_us: float | None = None
    """The worker process's CPU time a request, with ``--worker-process``."""
    server: str = "duetime"
    round: int = 0
    wrk_latencies: tuple[float, float, float, float] | None = None
    """p50, p90, p99 and max in ms, as wrk measured them (its phases keep no latencies)."""
    """The server process's CPU time a request (Linux): moves much less with the neighbours'
    load than the rate does."""

    @property
    def most(self) -> float:
        if self.wrk_latencies is not None:
            return self.wrk_latencies[3]
        return max(self.latencies) * 1000

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    def percentile(self, q: float) -> float:
        if self.wrk_latencies is not None:
            return {0.5: self.wrk_latencies[0], 0.9: self.wrk_latencies[1]}.get(
                q, self.wrk_latencies[2]
            )
        ordered = sorted(self.latencies)
        index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
        return ordered[index] * 1000


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def duetime_command() -> list[str]:
    script = Path(sys.executable).parent / "duetime"
    return [str(script)] if script.exists() else [sys.executable, "-m", "duetime.api"]


def load_average() -> str:
    return f"{os.getloadavg()[0]:.2f}"


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of process ``pid`` so far (None where /proc is missing)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def database(backend: str, workdir: Path, pg_url: str) -> Iterator[str]:
    """A fresh database URL: a SQLite file in ``workdir``, or a PostgreSQL schema of its own
    (dropped afterwards)."""
    if backend == "sqlite":
        yield f"sqlite:///{workdir / 'bench.db'}"
        return
    schema = f"dtbench_api_{uuid.uuid4().hex[:10]}"
    separator = "&" if "?" in pg_url else "?"
    try:
        yield f"{pg_url}{separator}schema={schema}"
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@contextmanager
def floor_database(backend: str, workdir: Path, pg_url: str) -> Iterator[str]:
    """The floor's database: a SQLite file, or a PostgreSQL schema of its own (dropped after),
    as the floor server's argument."""
    if backend == "sqlite":
        yield str(workdir / "floor.db")
        return
    schema = f"dtbench_floor_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    try:
        yield make_conninfo(pg_url, options=f"-c search_path={schema}")
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def wait_healthy(
    process: subprocess.Popen[bytes], port: int, log: Path, timeout: float = 600.0
) -> None:
    """Return once the server answers its health check; fail as soon as it exits. ``timeout``
    bounds a server that hangs while starting; it is no guess at how long a start takes, which
    a machine busy with other work makes many times longer."""
    deadline = time.monotonic() + timeout
    while process.poll() is None and time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    process.kill()
    raise SystemExit(f"the server did not start; see {log}")


def start_floor(workdir: Path, port: int, backend: str, target: str) -> subprocess.Popen[bytes]:
    """The floor server (:data:`FLOOR_MODULE`) in a process of its own."""
    script = workdir / "floorapp.py"
    script.write_text(FLOOR_MODULE)
    log = workdir / "floor.log"
    process = subprocess.Popen(
        [sys.executable, str(script), str(port), backend, target],
        cwd=workdir,
        stdout=subprocess.DEVNULL,
        stderr=open(log, "wb"),  # noqa: SIM115 - lives as long as the server
    )
    wait_healthy(process, port, log)
    return process


def start_worker(workdir: Path, url: str) -> subprocess.Popen[bytes]:
    """``duetime worker --app benchapp:app`` beside the server (``--worker-process``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUETIME_") or k == "DUETIME_GC"}
    env["DUETIME_DATABASE_URL"] = url
    return subprocess.Popen(
        [*duetime_command(), "worker", "--app", "benchapp:app", "--log-level", "warning"],
        cwd=workdir,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(workdir / "worker.log", "wb"),
    )


def start_server(
    workdir: Path, port: int, auth: bool, url: str, worker: bool = True
) -> tuple[subprocess.Popen[bytes], str]:
    (workdir / "benchapp.py").write_text(APP_MODULE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUETIME_") or k == "DUETIME_GC"}
    env["DUETIME_DATABASE_URL"] = url
    token = ""
    if auth:
        made = subprocess.run(
            [*duetime_command(), "tokens", "create", "--namespace", "bench", "--json"],
            cwd=workdir,
            env=env,
            capture_output=True,
            check=True,
        )
        token = json.loads(made.stdout)["token"]
    args = ["serve", "--port", str(port), "--log-level", "warning"]
    if worker:
        args += ["--app", "benchapp:app"]
    process = subprocess.Popen(
        [*duetime_command(), *args],
        cwd=workdir,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(workdir / "serve.log", "wb"),  # noqa: SIM115 - lives as long as the server
    )
    wait_healthy(process, port, workdir / "serve.log")
    return process, token


async def run_phase(
    base_url: str, token: str, clients: int, requests: int, tag: str, server: int
) -> Phase:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    latencies: list[float] = []
    errors = 0
    counter = iter(range(requests))

    async def client_loop() -> None:
        nonlocal errors
        async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=30) as client:
            for n in counter:
                body = {
                    "type": "bench.fire",
                    "key": f"{tag}-{n}",
                    "subject": f"user-{n % 1000}",
                    "delay": round(random.uniform(0, 2), 3),
                    "payload": {"n": n, "note": "x" * 64},
                }
                started = time.perf_counter()
                answer = await client.post("/v1/namespaces/bench/timers", json=body)
                latencies.append(time.perf_counter() - started)
                if answer.status_code != 201:
                    errors += 1

    load_before = load_average()
    cpu_before = cpu_seconds(server)
    started = time.perf_counter()
    await asyncio.gather(*(client_loop() for _ in range(clients)))
    seconds = time.perf_counter() - started
    cpu_after = cpu_seconds(server)
    load = f"{load_before}→{load_average()}"
    cpu_us = None
    if cpu_before is not None and cpu_after is not None:
        cpu_us = (cpu_after - cpu_before) / requests * 1e6
    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=30) as client:
        done_at_end = await count_done(client, tag)
        await asyncio.sleep(3)
        done_later = await count_done(client, tag)
        p50, p99 = await lateness(client)
    phase = Phase(clients, requests, seconds, latencies, errors, done_at_end, done_later, p50, p99)
    phase.load, phase.server_cpu_us = load, cpu_us
    return phase


WRK_SCRIPT = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local token = os.getenv("BENCH_TOKEN")
if token and token ~= "" then wrk.headers["Authorization"] = "Bearer " .. token end
local tag = os.getenv("BENCH_TAG")
local n = 0
math.randomseed(os.time())
request = function()
    n = n + 1
    local body = string.format(
        '{"type":"bench.fire","key":"%s-%d","subject":"user-%d","delay":%.3f,'
        .. '"payload":{"n":%d,"note":"%s"}}',
        tag, n, n % 1000, math.random() * 2, n, string.rep("x", 64))
    return wrk.format(nil, "/v1/namespaces/bench/timers", nil, body)
end
done = function(summary, latency, requests)
    local bad = summary.errors.status + summary.errors.connect + summary.errors.read
        + summary.errors.write + summary.errors.timeout
    io.write(string.format("WRK %d %d %.6f %d %d %d %d %d\\n", summary.requests,
        summary.duration, 0, bad, latency:percentile(50), latency:percentile(90),
        latency:percentile(99), latency.max))
end
"""
"""wrk's Lua: a unique key per request (the tag and a counter: one wrk thread), the same
bodies as the Python clients; done() prints requests, microseconds, errors and the latency
percentiles (µs) on one line."""


def run_wrk_phase(
    base_url: str,
    token: str,
    clients: int,
    seconds: float,
    tag: str,
    server: int,
    workdir: Path,
    worker: int | None = None,
) -> Phase:
    """A phase driven by wrk (one thread, ``clients`` keep-alive connections, ``seconds``
    long): a load generator that costs a fraction of the server's CPU a request, where the
    Python clients cost about as much as the server and share its two CPUs."""
    script = workdir / "post.lua"
    script.write_text(WRK_SCRIPT)
    env = {**os.environ, "BENCH_TOKEN": token, "BENCH_TAG": tag}
    load_before = load_average()
    cpu_before = cpu_seconds(server)
    worker_before = None if worker is None else cpu_seconds(worker)
    out = subprocess.run(
        ["wrk", "-t1", f"-c{clients}", f"-d{seconds:g}s", "-s", str(script), base_url],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    cpu_after = cpu_seconds(server)
    worker_after = None if worker is None else cpu_seconds(worker)
    line = next(line for line in out.splitlines() if line.startswith("WRK "))
    requests, micros, _, errors, p50, p90, p99, most = (float(x) for x in line.split()[1:])
    phase = Phase(int(clients), int(requests), micros / 1e6, [], int(errors), 0, 0, None, None)
    phase.wrk_latencies = (p50 / 1000, p90 / 1000, p99 / 1000, most / 1000)
    phase.load = f"{load_before}→{load_average()}"
    if cpu_before is not None and cpu_after is not None and requests:
        phase.server_cpu_us = (cpu_after - cpu_before) / requests * 1e6
    if worker_before is not None and worker_after is not None and requests:
        phase.worker_cpu_us = (worker_after - worker_before) / requests * 1e6
    return phase


async def fired(base_url: str, token: str, phase: Phase, tag: str) -> None:
    """How many of the phase's timers are done at its end and 3 s later, and the lateness."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=30) as client:
        phase.done_at_end = await count_done(client, tag)
        await asyncio.sleep(3)
        phase.done_later = await count_done(client, tag)
        phase.lateness_p50, phase.lateness_p99 = await lateness(client)


async def count_done(client: httpx.AsyncClient, tag: str) -> int:
    """Timers of this phase that are done (pages through the listing by status)."""
    done = 0
    cursor: str | None = None
    while True:
        params: dict[str, str | int] = {"status": "done", "limit": 1000}
        if cursor:
            params["cursor"] = cursor
        page = (await client.get("/v1/namespaces/bench/timers", params=params)).json()
        done += sum(1 for timer in page["items"] if timer["key"].startswith(f"{tag}-"))
        cursor = page["next_cursor"]
        if cursor is None:
            return done


async def lateness(client: httpx.AsyncClient) -> tuple[float | None, float | None]:
    """p50 / p99 lateness (upper bucket bounds, seconds) so far, from the stats endpoint."""
    stats = (await client.get("/v1/namespaces/bench/stats")).json()["lateness"]
    total = stats["count"]
    if not total:
        return None, None

    def bound(q: float) -> float | None:
        for bucket in stats["buckets"]:
            if bucket["count"] >= q * total:
                le: float | None = bucket["le"]
                return le
        return None

    return bound(0.5), bound(0.99)


def fmt_seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"≤{value * 1000:g} ms" if value < 1 else f"≤{value:g} s"


def print_table(phases: list[Phase], auth: bool, backend: str, worker_process: bool) -> None:
    header = (
        f"{'clients':>7} {'requests':>8} {'req/s':>8} {'p50 ms':>7} {'p90 ms':>7} "
        f"{'p99 ms':>7} {'max ms':>7} {'errors':>6} {'fired@end':>9} {'fired+3s':>8} "
        f"{'late p50':>9} {'late p99':>9} {'load 1-min':>12} {'CPU µs':>7}"
    )
    print()
    print(
        f"duetime REST API on {backend}: POST /v1/namespaces/bench/timers "
        f"(auth {'on' if auth else 'off'})"
    )
    print(header)
    print("-" * len(header))
    for p in phases:
        cpu = "-" if p.server_cpu_us is None else f"{p.server_cpu_us:.0f}"
        print(
            f"{p.clients:>7} {p.requests:>8} {p.rate:>8.0f} {p.percentile(0.5):>7.1f} "
            f"{p.percentile(0.9):>7.1f} {p.percentile(0.99):>7.1f} {p.most:>7.1f} "
            f"{p.errors:>6} {p.done_at_end:>9} {p.done_later:>8} "
            f"{fmt_seconds(p.lateness_p50):>9} {fmt_seconds(p.lateness_p99):>9} "
            f"{p.load:>12} {cpu:>7}"
        )
    mean = statistics.fmean(p.rate for p in phases)
    print(f"\nmean over phases: {mean:.0f} req/s; lateness is cumulative over the whole run")
    print("CPU µs: the server's CPU time a request (API and worker: it fires them meanwhile)")
    if worker_process:
        print("(the worker ran as a process of its own: the CPU µs are the API server's alone)")


def print_floor_table(phases: list[Phase], backend: str, worker_process: bool) -> None:
    """Per round and client count: the floor's and duetime's rate and CPU a request, the ratio."""
    print()
    print(f"duetime against the floor on {backend}: POST /v1/namespaces/bench/timers, wrk")
    header = (
        f"{'round':>5} {'clients':>7} {'floor req/s':>11} {'floor µs':>8} {'floor load':>11} "
        f"{'duetime req/s':>13} {'p99 ms':>7} {'duetime µs':>10} {'worker µs':>9} "
        f"{'duetime load':>13} {'ratio':>6}"
    )
    print(header)
    print("-" * len(header))
    pairs: dict[tuple[int, int], dict[str, Phase]] = {}
    for phase in phases:
        pairs.setdefault((phase.round, phase.clients), {})[phase.server] = phase
    for (round_, clients), pair in sorted(pairs.items()):
        floor, ours = pair.get("floor"), pair.get("duetime")
        if floor is None or ours is None:
            continue
        ratio = (
            "-"
            if floor.server_cpu_us is None or ours.server_cpu_us is None
            else f"{ours.server_cpu_us / floor.server_cpu_us:.2f}"
        )
        worker = "-" if ours.worker_cpu_us is None else f"{ours.worker_cpu_us:.0f}"
        print(
            f"{round_:>5} {clients:>7} {floor.rate:>11.0f} {floor.server_cpu_us or 0:>8.0f} "
            f"{floor.load:>11} {ours.rate:>13.0f} {ours.percentile(0.99):>7.1f} "
            f"{ours.server_cpu_us or 0:>10.0f} {worker:>9} {ours.load:>13} {ratio:>6}"
        )
    print(
        "µs: the server process's CPU time a request; ratio: duetime's over the floor's"
        + (
            " (duetime's API alone: its worker ran as a process of its own, its µs beside)"
            if worker_process
            else " (duetime's process also runs the worker firing what it creates)"
        )
    )


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=3000, help="Requests per phase.")
    parser.add_argument(
        "--clients", default="1,8,32", help="Comma-separated concurrent client counts."
    )
    parser.add_argument("--auth", action="store_true", help="Send a bearer token (auth on).")
    parser.add_argument(
        "--worker-process",
        action="store_true",
        help="Run the worker as a process of its own (duetime worker) beside the API server.",
    )
    parser.add_argument(
        "--wrk",
        type=float,
        metavar="SECONDS",
        help="Drive each phase with wrk for SECONDS (instead of --requests from Python clients).",
    )
    parser.add_argument(
        "--floor",
        type=int,
        metavar="ROUNDS",
        help="Also measure a minimal FastAPI + database endpoint, taking turns with duetime for "
        "ROUNDS rounds (needs --wrk).",
    )
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument(
        "--pg-url",
        default=os.environ.get("DUETIME_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test"),
    )
    args = parser.parse_args()
    if args.floor and not args.wrk:
        parser.error("--floor needs --wrk SECONDS")
    counts = [int(c) for c in args.clients.split(",")]
    print(f"$ {' '.join(shlex.quote(a) for a in [sys.executable, *sys.argv])}")
    import duetime  # the code under test: the server runs this interpreter's duetime

    print(f"duetime from {Path(duetime.__file__).parent}; {os.cpu_count()} CPUs", flush=True)
    print(f"uptime at the start: {uptime()}", flush=True)
    with (
        tempfile.TemporaryDirectory(prefix="duetime-api-bench-") as tmp,
        database(args.backend, Path(tmp), args.pg_url) as url,
        (
            floor_database(args.backend, Path(tmp), args.pg_url)
            if args.floor
            else contextlib.nullcontext("")
        ) as floor_target,
    ):
        workdir = Path(tmp)
        port = free_port()
        worker = floor = None
        if args.worker_process:  # first: it makes the namespace the requests go to
            (workdir / "benchapp.py").write_text(APP_MODULE)
            worker = start_worker(workdir, url)
            time.sleep(3)
        process, token = start_server(workdir, port, args.auth, url, not args.worker_process)
        pid = process.pid
        base_url = f"http://127.0.0.1:{port}"
        try:
            phases = []
            if args.floor:
                floor_port = free_port()
                floor = start_floor(workdir, floor_port, args.backend, floor_target)
                servers = [
                    ("floor", f"http://127.0.0.1:{floor_port}", floor.pid, None),
                    ("duetime", base_url, pid, None if worker is None else worker.pid),
                ]
                print("warming up both servers (2 s of wrk each)...", flush=True)
                for name, address, server_pid, _ in servers:
                    run_wrk_phase(
                        address, token, max(counts), 2, f"warm{name}", server_pid, workdir
                    )
                for round_ in range(1, args.floor + 1):
                    for name, address, server_pid, worker_pid in servers:
                        for clients in counts:
                            print(
                                f"round {round_}, {name}: wrk, {clients} connections x "
                                f"{args.wrk:g} s...",
                                flush=True,
                            )
                            tag = f"r{round_}{name}c{clients}"
                            phase = run_wrk_phase(
                                address,
                                token,
                                clients,
                                args.wrk,
                                tag,
                                server_pid,
                                workdir,
                                worker_pid,
                            )
                            phase.server, phase.round = name, round_
                            print(
                                f"  {phase.rate:.0f} req/s, {phase.server_cpu_us or 0:.0f} µs "
                                f"CPU a request, {phase.errors} errors, load {phase.load}",
                                flush=True,
                            )
                            phases.append(phase)
                print(f"uptime at the end: {uptime()}")
                print_floor_table(phases, args.backend, args.worker_process)
                return
            for clients in counts:
                tag = f"c{clients}"
                if args.wrk:
                    print(f"phase: wrk, {clients} connections x {args.wrk:g} s...", flush=True)
                    phase = run_wrk_phase(base_url, token, clients, args.wrk, tag, pid, workdir)
                    asyncio.run(fired(base_url, token, phase, tag))
                    phases.append(phase)
                    continue
                print(f"phase: {clients} clients x {args.requests} requests...", flush=True)
                phases.append(
                    asyncio.run(run_phase(base_url, token, clients, args.requests, tag, pid))
                )
        finally:
            for running in (process, worker, floor):
                if running is not None:
                    running.terminate()
                    running.wait(timeout=60)
        print_table(phases, args.auth, args.backend, args.worker_process)


if __name__ == "__main__":
    main()
