"""duetime on PostgreSQL against pgqueuer, procrastinate, oban and a raw-SQL floor, in one run.

Run by hand (not part of the test suite)::

    .venv/bin/python bench/pg_bench.py --quick                       # smaller numbers (~4 min)
    .venv/bin/python bench/pg_bench.py                               # full run (< 20 min)
    .venv/bin/python bench/pg_bench.py --only duetime,raw --scenarios mass,immediate
    .venv/bin/python bench/pg_bench.py --scenarios claim --claim-rows 1000000
    .venv/bin/python bench/pg_bench.py --only duetime,pgqueuer,raw --rounds 3   # medians of 3
    .venv/bin/python bench/pg_bench.py --only duetime --metrics --tracing --rounds 3 \
        --scenarios mass,lateness           # what metrics and tracing cost, in alternating rounds
    .venv-bench/bin/python bench/pg_bench.py --only duetime,oban --scenarios mass,lateness,idle
    .venv-bench/bin/python bench/pg_bench.py --only duetime,celery --scenarios lateness,idle

Needs the ``bench`` extra (pgqueuer, procrastinate, oban on Python 3.12+, Celery with Redis,
psutil; asyncpg too for pgqueuer's usual driver) and
a PostgreSQL where the user may CREATE DATABASE (default ``postgresql://postgres@127.0.0.1:5432``,
``--base``). Every system gets its own database ``dtbench_<system>``, dropped and created again
for every scenario, and works in ``--workers`` separate processes (its normal worker, a no-op
handler, the same ``--concurrency``). Scenarios:

  mass       (a) N jobs due at one future instant: enqueue rate (batch API, 1000 a batch), then
             time from the instant until all are done
  lateness   (b) jobs due evenly over S seconds, workers running: handler start - due (ms)
  immediate  (c) N jobs already due when the workers start: drain rate
  (d)        the raw-SQL floor is the ``raw`` system in mass and immediate
  claim      (e) duetime's claim_due statement (claims.sql) with 10M pending timers bulk-loaded
             into its table: latency of batches of 100, and the plan, before and after ANALYZE
  enqueue    (a)'s enqueue alone, no workers: rate, client CPU and backend CPU a job
  idle       (f) the workers running with 10,000 timers due over the next hour and nothing due:
             transactions/s of the system's own database (pg_stat_database), the CPU of its
             worker processes and of its database backends, over 30 s

``celery`` (only when named in ``--only``) is Celery on Redis, ETA tasks: lateness and idle only
(its idle figure is Redis commands/s, INFO commandstats, server-wide). ``raw`` takes part in
mass and immediate only.

``--tables fresh,analysed`` runs mass and immediate on never-analysed tables and again after an
ANALYZE between enqueueing and working. Every wait is bounded (``--timeout``): a system that does
not finish is reported with what it did. ``--rounds N`` runs mass, immediate and lateness N
times, the systems taking turns, and reports each figure's median with the range of its runs:
on a busy 2-core machine one run of a drain can be a tenth off. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import mmap
import os
import platform
import re
import select
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cost_ratios import ratio_lines
from peers import PEERS, STORE_SCENARIOS, SYSTEMS, System, default_systems, load

DEFAULT_BASE = "postgresql://postgres@127.0.0.1:5432"
ADMIN_DB = "postgres"
DB_PREFIX = os.environ.get("PG_BENCH_DB_PREFIX", "dtbench_")
"""Every database this run makes starts with it: set PG_BENCH_DB_PREFIX to run beside another
run of this script on the same server."""
READY_TIMEOUT = 60.0
STOP_TIMEOUT = 45.0
PRELUDE_PARAMS = {"claim_commit": "off"}
"""claims.sql's ``claim_in_order`` as the store sends it by default (no ``durable_claims``)."""


# -- results ---------------------------------------------------------------------------------
@dataclass
class Figure:
    scenario: str
    measure: str
    unit: str
    higher_is_better: bool
    values: dict[str, float | None] = field(default_factory=dict)
    """Each system's figure: its one run's, or with ``--rounds`` the median of its runs'."""
    notes: dict[str, str] = field(default_factory=dict)
    samples: dict[str, list[float | None]] = field(default_factory=dict)
    """Every run's value, in order (None: the run had no figure, e.g. a timeout)."""
    sample_notes: dict[str, list[str]] = field(default_factory=dict)
    peer_target: float | None = None
    """duetime must be this many times the best peer (throughput) — None: no such target."""
    raw_target: float | None = None
    """duetime must reach this fraction of the raw-SQL floor — None: no such target."""
    limit: float | None = None
    """duetime's value must be at most this (latencies) — None: no such target."""
    limit_strict: bool = False
    """The limit is "less than", not "at most"."""

    def best_peer(self) -> tuple[str, float] | None:
        peers = [(s, v) for s, v in self.values.items() if s in PEERS and v is not None]
        if not peers:
            return None
        pick = max if self.higher_is_better else min
        return pick(peers, key=lambda sv: sv[1])

    def advantage(self) -> float | None:
        """How many times better duetime is than the best peer (> 1: better)."""
        mine, best = self.values.get("duetime"), self.best_peer()
        if mine is None or best is None or mine <= 0 or best[1] <= 0:
            return None
        return mine / best[1] if self.higher_is_better else best[1] / mine

    def of_raw(self) -> float | None:
        """duetime's throughput as a fraction of the raw-SQL floor's (throughputs only)."""
        mine, raw = self.values.get("duetime"), self.values.get("raw")
        if not self.higher_is_better or mine is None or raw is None or raw <= 0:
            return None
        return mine / raw

    def verdicts(self) -> list[tuple[str, bool | None]]:
        """(target text, passed?) — passed is None when a figure it needs is missing."""
        out: list[tuple[str, bool | None]] = []
        if self.peer_target is not None:
            adv = self.advantage()
            out.append(
                (
                    f"≥ {self.peer_target:g}x best peer",
                    None if adv is None else adv >= self.peer_target,
                )
            )
        if self.raw_target is not None:
            frac = self.of_raw()
            out.append(
                (
                    f"≥ {self.raw_target:.0%} of raw SQL",
                    None if frac is None else frac >= self.raw_target,
                )
            )
        if self.limit is not None:
            mine = self.values.get("duetime")
            if mine is None:
                passed = None
            else:
                passed = mine < self.limit if self.limit_strict else mine <= self.limit
            sign = "<" if self.limit_strict else "≤"
            out.append((f"{sign} {self.limit:g} {self.unit}", passed))
        return out


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "jobs/s":
        return f"{value:,.0f}/s"
    if unit == "ms":
        return f"{value:,.2f} ms" if value < 100 else f"{value:,.0f} ms"
    if unit == "s":
        return f"{value:,.2f} s"
    if unit == "us":
        return f"{value:,.1f} µs" if value < 100 else f"{value:,.0f} µs"
    if unit == "B":
        return f"{value:,.0f} B"
    return f"{value:,.2f} {unit}"


def verdict_text(passed: bool | None) -> str:
    return "n/a" if passed is None else ("PASS" if passed else "FAIL")


class Report:
    def __init__(self, systems: Sequence[str]) -> None:
        self.systems = list(systems)
        self.figures: list[Figure] = []
        self.plans: list[tuple[str, str]] = []

    def figure(
        self, scenario: str, measure: str, unit: str, higher_is_better: bool, **kw: Any
    ) -> Figure:
        for f in self.figures:
            if f.scenario == scenario and f.measure == measure:
                return f
        fig = Figure(scenario, measure, unit, higher_is_better, **kw)
        self.figures.append(fig)
        return fig

    def put(self, fig: Figure, system: str, value: float | None, note: str = "") -> None:
        """Record one run's figure. Runs of the same figure (``--rounds``) are summed up as
        their median, the range beside it: one run on a busy machine can be off by a tenth."""
        samples = fig.samples.setdefault(system, [])
        samples.append(value)
        notes = fig.sample_notes.setdefault(system, [])
        if note:
            notes.append(note)
        measured = [v for v in samples if v is not None]
        if len(samples) == 1:
            fig.values[system] = value
            fig.notes[system] = note
        else:
            fig.values[system] = statistics.median(measured) if measured else None
            spread = (
                f"median of {len(measured)}, {fmt(min(measured), fig.unit)} to "
                f"{fmt(max(measured), fig.unit)}"
                if len(measured) > 1
                else ""
            )
            missed = len(samples) - len(measured)
            fig.notes[system] = "; ".join(
                part
                for part in (
                    spread,
                    f"{missed} of {len(samples)} runs without a figure" if missed else "",
                    *notes,
                )
                if part
            )
        print(
            f"    {fig.scenario:<22} {fig.measure:<34} {system:<14} {fmt(value, fig.unit):>14}"
            f"  {note}",
            flush=True,
        )

    def verdict_lines(self) -> list[str]:
        lines = []
        for f in self.figures:
            for target, passed in f.verdicts():
                lines.append(
                    f"  {verdict_text(passed):<5} {f.scenario}: {f.measure} — duetime {target}"
                )
        return lines

    def markdown(self) -> str:
        labels = {
            "duetime": "duetime",
            "duetime_metrics": "duetime +metrics",
            "duetime_tracing": "duetime +tracing",
            "duetime_sampled": "duetime +tracing 10%",
            "duetime_sealed": "duetime +sealed",
            "pgqueuer": "pgqueuer",
            "procrastinate": "procrastinate",
            "oban": "oban",
            "raw": "raw SQL",
            "celery": "Celery (Redis, not durable)",
        }
        cols = [s for s in SYSTEMS if s in self.systems]
        head = [
            "scenario",
            "measure",
            *(labels[s] for s in cols),
            "duetime advantage over best peer",
            "duetime ÷ raw",
            "targets",
        ]
        out = [
            "| " + " | ".join(head) + " |",
            "|" + "|".join(["---"] * 2 + ["---:"] * (len(cols) + 2) + ["---"]) + "|",
        ]
        for f in self.figures:
            cells = [f.scenario, f.measure]
            for s in cols:
                text = fmt(f.values.get(s), f.unit) if s in f.values else ""
                if f.notes.get(s):
                    text += f" ({f.notes[s]})"
                cells.append(text)
            adv = f.advantage()
            cells.append("" if adv is None else f"{adv:.2f}x")
            raw = f.of_raw()
            cells.append("" if raw is None else f"{raw:.0%}")
            cells.append("; ".join(f"{verdict_text(p)} {t}" for t, p in f.verdicts()))
            out.append("| " + " | ".join(cells) + " |")
        return "\n".join(out)


# -- databases -------------------------------------------------------------------------------
def admin(base: str, sql: str) -> None:
    with psycopg.connect(f"{base}/{ADMIN_DB}", autocommit=True) as conn:
        conn.execute(sql)


def recreate_db(base: str, db: str) -> None:
    admin(base, f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
    admin(base, f'CREATE DATABASE "{db}"')


def drop_db(base: str, db: str) -> None:
    admin(base, f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


def query_value(base: str, db: str, sql: str) -> Any:
    with psycopg.connect(f"{base}/{db}", autocommit=True) as conn:
        row = conn.execute(sql).fetchone()
        return None if row is None else row[0]


def checkpoints(base: str) -> int:
    """Checkpoints the server has started so far (timed or requested)."""
    return int(
        query_value(
            base, ADMIN_DB, "SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter"
        )
    )


def wal_lsn(base: str) -> int:
    """The server's WAL insert position, in bytes (shared by every database on the server)."""
    return int(query_value(base, ADMIN_DB, "SELECT pg_current_wal_insert_lsn() - '0/0'"))


CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int) -> float:
    """user + system CPU of one process (Linux /proc; 0 when unreadable or gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def tree_cpu(pid: int) -> dict[int, float]:
    """CPU seconds of a process and of every process below it (a worker the system starts in a
    process of its own, e.g. ``celery worker``, counts as the system's worker)."""
    import psutil

    found = {pid: cpu_seconds(pid)}
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(pid).children(recursive=True):
            found[child.pid] = cpu_seconds(child.pid)
    return found


def backend_cpu(db: str) -> dict[int, float]:
    """CPU seconds of each PostgreSQL backend connected to ``db`` (a local server only: its
    processes are found in /proc by their title, ``postgres: … user db host(port) state``)."""
    found: dict[int, float] = {}
    marker = f" {db} ".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            title = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if title.startswith(b"postgres:") and marker in title:
            found[int(entry.name)] = cpu_seconds(int(entry.name))
    return found


class CpuMeter:
    """CPU spent by a system's worker processes and by its database backends between two
    instants — per job, the cost of one job on each side of the wire."""

    def __init__(self, db: str, group: Workers) -> None:
        self.db, self.group = db, group
        self.backends = backend_cpu(db)
        self.workers = self.worker_cpu()

    def worker_cpu(self) -> dict[int, float]:
        return {pid: cpu for c in self.group.children for pid, cpu in tree_cpu(c.pid).items()}

    def stop(self) -> tuple[float, float]:
        """(worker CPU s, backend CPU s) since start; a process started since counts whole."""
        now_b = backend_cpu(self.db)
        backend = sum(cpu - self.backends.get(pid, 0.0) for pid, cpu in now_b.items())
        now_w = self.worker_cpu()
        worker = sum(cpu - self.workers.get(pid, 0.0) for pid, cpu in now_w.items())
        return worker, backend


class BackendWatch:
    """The CPU of every PostgreSQL backend connected to ``db`` while a client works: a thread
    reads them every ``every`` seconds (a client closes its connections before it returns, and
    a gone backend's /proc entry with them), each backend's last reading counting; a backend
    there at the start counts from its reading then. The thread's own CPU is kept apart
    (:attr:`own_cpu`) so that the client's can leave it out."""

    def __init__(self, base: str, db: str, every: float = 0.02) -> None:
        import threading

        self.base, self.db, self.every = base, db, every
        self.first: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self.own_cpu = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> BackendWatch:
        with psycopg.connect(f"{self.base}/{ADMIN_DB}", autocommit=True) as conn:
            self.first = {pid: cpu_seconds(pid) for pid in self._pids(conn)}
        self.last = dict(self.first)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _pids(self, conn: psycopg.Connection[Any]) -> list[int]:
        sql = "SELECT pid FROM pg_stat_activity WHERE datname = %s"
        return [row[0] for row in conn.execute(sql, (self.db,))]

    def _run(self) -> None:
        started = time.thread_time()
        with psycopg.connect(f"{self.base}/{ADMIN_DB}", autocommit=True) as conn:
            while True:
                for pid in self._pids(conn):
                    cpu = cpu_seconds(pid)
                    if cpu:
                        self.last[pid] = max(cpu, self.last.get(pid, 0.0))
                if self._stop.wait(self.every):
                    break
        self.own_cpu = time.thread_time() - started

    def backend_cpu(self) -> float:
        """CPU seconds the backends spent between the start and the stop."""
        return sum(cpu - self.first.get(pid, 0.0) for pid, cpu in self.last.items())


def analyze(base: str, db: str) -> None:
    with psycopg.connect(f"{base}/{db}", autocommit=True) as conn:
        conn.execute("ANALYZE")


# -- worker processes ------------------------------------------------------------------------
class Workers:
    """``count`` child processes running one system's worker; a shared counter of handled jobs."""

    def __init__(
        self, args: argparse.Namespace, system: str, db: str, count: int, late: bool, tmp: Path
    ) -> None:
        self.system, self.count, self.late = system, count, late
        self.children: list[subprocess.Popen[bytes]] = []
        self.outs = [tmp / f"{system}-{db}-{i}.json" for i in range(count)]
        counter = tmp / f"{system}-{db}.counter"
        counter.write_bytes(b"\0" * 8 * count)
        self._fd = os.open(counter, os.O_RDWR)
        self._mm = mmap.mmap(self._fd, 8 * count)
        self._counts = memoryview(self._mm).cast("q")
        for i in range(count):
            cmd = [
                sys.executable,
                str(Path(__file__).resolve()),
                "--child",
                system,
                "--child-db",
                db,
                "--child-counter",
                str(counter),
                "--child-slot",
                str(i),
                "--base",
                args.base,
                "--concurrency",
                str(args.concurrency),
                "--batch-size",
                str(args.batch_size),
            ]
            if late:
                cmd += ["--child-out", str(self.outs[i])]
            self.children.append(
                subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            )
        deadline = time.monotonic() + READY_TIMEOUT
        for child in self.children:
            assert child.stdout is not None
            line = b""
            while time.monotonic() < deadline and child.poll() is None:
                ready, _, _ = select.select([child.stdout], [], [], 0.1)
                if ready:
                    line = child.stdout.readline()
                    break
            if line.strip() != b"ready":
                self.stop()
                raise RuntimeError(f"{system} worker process did not start (said {line!r})")

    def go(self) -> float:
        at = time.time()
        for child in self.children:
            assert child.stdin is not None
            child.stdin.write(b"go\n")
            child.stdin.flush()
        return at

    def handled(self) -> int:
        return sum(self._counts)

    def alive(self) -> bool:
        return any(child.poll() is None for child in self.children)

    def stop(self) -> list[float]:
        """SIGTERM every child, wait (bounded), and return the lateness they recorded (ms)."""
        for child in self.children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        for child in self.children:
            try:
                child.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                print(f"    ! {self.system} worker {child.pid} ignored SIGTERM; killing it")
                child.kill()
                child.wait()
        late: list[float] = []
        for out in self.outs:
            if out.exists():
                late += json.loads(out.read_text())
        self._counts.release()
        self._mm.close()
        os.close(self._fd)
        return late


@contextlib.contextmanager
def workers(
    args: argparse.Namespace, system: str, db: str, late: bool, tmp: Path
) -> Iterator[Workers]:
    group = Workers(args, system, db, args.workers, late, tmp)
    try:
        yield group
    finally:
        if group.children and any(c.returncode is None for c in group.children):
            group.stop()


def wait_done(
    base: str, db: str, sut: System, group: Workers, n: int, deadline: float
) -> tuple[float | None, int]:
    """Wait until the system has finished all ``n`` jobs; (when, how many finished).

    The shared counter says when every handler has run (no database load meanwhile); from then
    on the database is asked, every few ms, whether anything is left unfinished. The instant is
    the moment the deciding query was sent (its snapshot saw nothing left).
    """
    with psycopg.connect(f"{base}/{db}", autocommit=True) as conn:
        while time.time() < deadline:
            if group.handled() < n:
                if not group.alive():
                    break
                time.sleep(0.002)
                continue
            asked = time.time()
            remaining = conn.execute(sut.remaining_sql).fetchone()[0]  # type: ignore[index]
            if remaining == 0:
                return asked, n
            time.sleep(0.005)
        remaining = conn.execute(sut.remaining_sql).fetchone()[0]  # type: ignore[index]
    return None, n - int(remaining)


# -- scenarios -------------------------------------------------------------------------------
class Bench:
    def __init__(self, args: argparse.Namespace, report: Report, tmp: Path) -> None:
        self.args = args
        self.report = report
        self.tmp = tmp
        self.rate_hint: dict[str, float] = {}

    def system(self, name: str) -> System:
        return load(name)(self.args.base)

    def fresh(self, sut: System) -> str:
        """A new database with the system's tables, and a CHECKPOINT, so every run starts from
        the same server state (no checkpoint left over from the previous run's WAL)."""
        db = self.args.db_prefix + sut.name
        if not sut.uses_postgres:  # Celery: its broker database emptied
            asyncio.run(sut.install(db))
            return db
        recreate_db(self.args.base, db)
        asyncio.run(sut.install(db))
        admin(self.args.base, "CHECKPOINT")
        return db

    def enqueue(self, sut: System, db: str, dues: Sequence[float | None]) -> float:
        rate, _, _ = self.enqueue_costs(sut, db, dues)
        return rate

    def enqueue_costs(
        self, sut: System, db: str, dues: Sequence[float | None]
    ) -> tuple[float, float, float]:
        """(jobs/s, this process's CPU µs a job, its PostgreSQL backends' CPU µs a job) of
        enqueueing ``dues``: the client's CPU is everything the enqueue did in this process
        (connecting, opening, validating, encoding, reading the answers), the watch's thread
        left out; the backends' is every backend of ``db`` meanwhile (the idle workers' count
        too, a few µs in all)."""
        import resource

        with BackendWatch(self.args.base, db) as watch:
            before = resource.getrusage(resource.RUSAGE_SELF)
            started = time.perf_counter()
            asyncio.run(sut.enqueue(db, dues))
            seconds = time.perf_counter() - started
            after = resource.getrusage(resource.RUSAGE_SELF)
        client = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        client -= watch.own_cpu
        n = len(dues)
        self.rate_hint[sut.name] = n / seconds
        return n / seconds, client / n * 1e6, watch.backend_cpu() / n * 1e6

    def lead_for(self, sut: System, n: int) -> float:
        """Seconds from now to the due instant so that enqueueing ``n`` surely finishes first."""
        if self.args.lead:
            return float(self.args.lead)
        if sut.name not in self.rate_hint:  # calibrate on a throwaway database
            db = self.fresh(sut)
            probe = min(n, 5000)
            far = time.time() + 86400
            self.enqueue(sut, db, [far] * probe)
        return 1.5 + 1.3 * n / self.rate_hint[sut.name]

    # (a) mass due and (d) raw floor
    def mass(self, name: str, n: int, tables: str) -> None:
        args, rep = self.args, self.report
        sut = self.system(name)
        scen = f"(a) mass due, {tables}"
        enq = rep.figure(scen, f"enqueue {n:,} (batches of 1000)", "jobs/s", True, peer_target=2.0)
        enq_cpu = self.enqueue_cpu_figures(scen)
        took = rep.figure(scen, "due instant → all done", "s", False)
        rate = rep.figure(scen, "drain rate", "jobs/s", True, peer_target=2.0, raw_target=0.5)
        lead = self.lead_for(sut, n)
        db = self.fresh(sut)
        with workers(args, name, db, False, self.tmp) as group:
            due = time.time() + lead
            self.put_enqueue(enq, enq_cpu, name, self.enqueue_costs(sut, db, [due] * n))
            if tables == "analysed":
                analyze(args.base, db)
            costs = self.cost_figures(scen)
            group.go()
            overran = time.time() > due
            if overran:
                print(f"    ! {name}: enqueueing overran the {lead:.1f} s lead; raise --lead")
            time.sleep(max(0.0, due - time.time() - 0.2))
            lsn, meter = wal_lsn(args.base), CpuMeter(db, group)
            finished, done = wait_done(args.base, db, sut, group, n, due + args.timeout)
            spent = meter.stop(), wal_lsn(args.base) - lsn
            group.stop()
        if finished is None:
            spent = args.timeout
            rep.put(took, name, None, f"timeout: {done:,}/{n:,} done in {spent:.0f} s")
            rep.put(rate, name, done / spent, f"partial: {done:,}/{n:,}")
            return
        seconds = finished - due
        rep.put(took, name, seconds, "lead overran" if overran else "")
        rep.put(rate, name, n / seconds)
        self.put_costs(costs, name, n, *spent)

    # (a) the mass scenario's enqueue alone
    def enqueue_only(self, name: str, n: int) -> None:
        """(a)'s enqueue without the workers and their drain: N jobs due in an hour into a fresh
        database, for comparing enqueues in quick alternating rounds."""
        sut = self.system(name)
        scen = "(a) enqueue only, fresh"
        enq = self.report.figure(scen, f"enqueue {n:,} (batches of 1000)", "jobs/s", True)
        db = self.fresh(sut)
        due = time.time() + 3600
        self.put_enqueue(
            enq, self.enqueue_cpu_figures(scen), name, self.enqueue_costs(sut, db, [due] * n)
        )

    # (c) immediate and (d) raw floor
    def immediate(self, name: str, n: int, tables: str) -> None:
        args, rep = self.args, self.report
        sut = self.system(name)
        scen = f"(c) immediate, {tables}"
        enq = rep.figure(scen, f"enqueue {n:,} due now", "jobs/s", True)
        enq_cpu = self.enqueue_cpu_figures(scen)
        rate = rep.figure(scen, "drain rate", "jobs/s", True, peer_target=2.0, raw_target=0.5)
        db = self.fresh(sut)
        with workers(args, name, db, False, self.tmp) as group:
            self.put_enqueue(enq, enq_cpu, name, self.enqueue_costs(sut, db, [None] * n))
            if tables == "analysed":
                analyze(args.base, db)
            costs = self.cost_figures(scen)
            lsn, meter = wal_lsn(args.base), CpuMeter(db, group)
            started = group.go()
            finished, done = wait_done(args.base, db, sut, group, n, started + args.timeout)
            spent = meter.stop(), wal_lsn(args.base) - lsn
            group.stop()
        if finished is None:
            rep.put(rate, name, done / args.timeout, f"timeout: {done:,}/{n:,} done")
            return
        rep.put(rate, name, n / (finished - started), f"{finished - started:.2f} s")
        self.put_costs(costs, name, n, *spent)

    def enqueue_cpu_figures(self, scen: str) -> tuple[Figure, Figure]:
        rep = self.report
        return (
            rep.figure(scen, "enqueue: client CPU per job", "us", False),
            rep.figure(scen, "enqueue: PostgreSQL backend CPU per job", "us", False),
        )

    def put_enqueue(
        self, rate: Figure, cpu: tuple[Figure, Figure], name: str, costs: tuple[float, ...]
    ) -> None:
        self.report.put(rate, name, costs[0])
        self.report.put(cpu[0], name, costs[1])
        self.report.put(cpu[1], name, costs[2])

    def cost_figures(self, scen: str) -> tuple[Figure, Figure, Figure]:
        rep = self.report
        return (
            rep.figure(scen, "worker CPU per job", "us", False),
            rep.figure(scen, "PostgreSQL backend CPU per job", "us", False),
            rep.figure(scen, "WAL per job (whole server)", "B", False),
        )

    def put_costs(
        self,
        figs: tuple[Figure, Figure, Figure],
        name: str,
        n: int,
        cpu: tuple[float, float],
        wal: int,
    ) -> None:
        worker, backend = cpu
        self.report.put(figs[0], name, worker / n * 1e6)
        self.report.put(figs[1], name, backend / n * 1e6)
        self.report.put(figs[2], name, wal / n)

    # (b) lateness
    def lateness(self, name: str, n: int, seconds: float) -> None:
        args, rep = self.args, self.report
        sut = self.system(name)
        scen = f"(b) lateness, {n:,} over {seconds:g} s"
        figs = {
            "p50": rep.figure(scen, "p50 handler start - due", "ms", False),
            "p95": rep.figure(scen, "p95", "ms", False),
            "p99": rep.figure(scen, "p99", "ms", False, limit=args.lateness_target),
            "max": rep.figure(scen, "max", "ms", False),
        }
        lead = max(2.0, self.lead_for(sut, n))
        db = self.fresh(sut)
        with workers(args, name, db, True, self.tmp) as group:
            group.go()  # workers run while the timers are stored, as in production
            time.sleep(0.5)
            base = time.time() + lead
            dues = [base + seconds * i / n for i in range(n)]
            before = checkpoints(args.base)
            self.enqueue(sut, db, dues)
            if time.time() > base:
                print(f"    ! {name}: enqueueing overran the {lead:.1f} s lead; raise --lead")
            deadline = dues[-1] + args.late_grace
            while time.time() < deadline and group.handled() < n and group.alive():
                time.sleep(0.05)
            handled = group.handled()
            during = checkpoints(args.base) - before
            late = group.stop()
        note = "" if len(late) >= n else f"only {len(late):,}/{n:,} ran"
        if during:
            note = ", ".join(filter(None, [note, f"{during} checkpoint(s) during the run"]))
        if not late:
            for fig in figs.values():
                rep.put(fig, name, None, note or "no data")
            return
        q = statistics.quantiles(late, n=100, method="inclusive")
        rep.put(figs["p50"], name, q[49], note)
        rep.put(figs["p95"], name, q[94])
        rep.put(figs["p99"], name, q[98])
        rep.put(figs["max"], name, max(late), f"{handled - n:+,} extra runs" if handled > n else "")

    # (f) idle cost
    def idle(self, name: str, n: int, seconds: float) -> None:
        """The workers running, ``n`` timers due over the hour after next, nothing due: what the
        system costs its database (transactions/s) and the machine (CPU) while it waits."""
        args, rep = self.args, self.report
        sut = self.system(name)
        scen = f"(f) idle, {n:,} due in 1-2 h, {seconds:g} s"
        xacts = rep.figure(scen, "database transactions/s (Celery: Redis commands/s)", "/s", False)
        wcpu = rep.figure(scen, "worker CPU, % of a core", "%", False)
        bcpu = rep.figure(scen, "PostgreSQL backend CPU, % of a core", "%", False)
        db = self.fresh(sut)
        with workers(args, name, db, False, self.tmp) as group:
            group.go()  # workers run while the timers are stored, as in production
            time.sleep(0.5)
            start = time.time() + 3600
            self.enqueue(sut, db, [start + 3600 * i / n for i in range(n)])
            time.sleep(args.idle_settle)  # the enqueue's commits counted, workers at rest
            before, meter, t0 = activity(args.base, sut, db), CpuMeter(db, group), time.time()
            time.sleep(seconds)
            after, spent, elapsed = activity(args.base, sut, db), meter.stop(), time.time() - t0
            ran = group.handled()
            group.stop()
        note = f"{ran:,} ran early!" if ran else ""
        if not sut.uses_postgres:
            note = ", ".join(filter(None, [note, "server-wide: INFO commandstats calls"]))
        rep.put(xacts, name, (after - before) / elapsed, note)
        rep.put(wcpu, name, spent[0] / elapsed * 100)
        rep.put(bcpu, name, spent[1] / elapsed * 100 if sut.uses_postgres else None)

    # (e) claim latency with many pending timers
    def claim(self, rows: int, iterations: int) -> None:
        from duetime.store.postgres.settings import parse_url
        from duetime.store.queries import load_queries, query_files

        args, rep = self.args, self.report
        sut = self.system("duetime")
        db = args.db_prefix + "claim"
        recreate_db(args.base, db)
        asyncio.run(sut.install(db))
        url = sut.url(db)  # type: ignore[attr-defined]
        conninfo = parse_url(url).conninfo  # the store's own session settings
        queries = load_queries("duetime.store.postgres", *query_files("duetime.store.postgres"))
        claim_sql = queries["claim_due"]
        prelude = queries.get("claim_in_order")  # sent first in the claim's transaction
        due_now = max(int(rows * args.claim_due_fraction), 5 * iterations * 100)
        print(f"    loading {rows:,} pending timers ({due_now:,} already due) …", flush=True)
        started = time.perf_counter()
        rows = load_pending(conninfo, rows, due_now, args.claim_load_budget)
        load_s = time.perf_counter() - started
        print(f"    loaded in {load_s:.0f} s ({rows / load_s:,.0f} rows/s)", flush=True)
        scen = f"(e) claim, {rows:,} pending"
        for phase in ("fresh", "analysed"):
            if phase == "analysed":
                with psycopg.connect(conninfo, autocommit=True) as conn:
                    t = time.perf_counter()
                    conn.execute("ANALYZE timers")
                    print(f"    ANALYZE timers: {time.perf_counter() - t:.1f} s", flush=True)
            times, got, plans, statement, commits = time_claims(
                conninfo, claim_sql, iterations, prelude
            )
            p50 = statistics.median(times)
            p99 = statistics.quantiles(times, n=100, method="inclusive")[98]
            note = "" if min(got) == 100 else f"some claims got {min(got)} rows"
            rep.put(
                rep.figure(
                    scen,
                    f"claim 100, median ({phase} table)",
                    "ms",
                    False,
                    limit=5.0,
                    limit_strict=True,
                ),
                "duetime",
                p50,
                note,
            )
            rep.put(
                rep.figure(
                    scen,
                    f"claim 100, p99 ({phase} table)",
                    "ms",
                    False,
                    limit=5.0,
                    limit_strict=True,
                ),
                "duetime",
                p99,
                f"max {max(times):,.0f} ms; first 10 runs {statistics.mean(times[:10]):,.1f} ms "
                f"on average; {sum(t > 100 for t in times)} of {len(times)} over 100 ms",
            )
            rep.put(
                rep.figure(
                    scen,
                    f"claim 100, the statement alone, median ({phase} table)",
                    "ms",
                    False,
                    limit=5.0,
                    limit_strict=True,
                ),
                "duetime",
                statistics.median(statement),
                f"p99 {statistics.quantiles(statement, n=100, method='inclusive')[98]:,.2f} ms;"
                f" its COMMIT (WAL flush) {statistics.median(commits):,.2f} ms median",
            )
            for label, plan in plans:
                title = f"claim_due LIMIT 100, {rows:,} pending, {phase} table, {label}"
                rep.plans.append((title, plan))
                print(f"\n    EXPLAIN (ANALYZE, BUFFERS) {title}:\n")
                print("\n".join("      " + line for line in plan.splitlines()) + "\n", flush=True)
        if not args.keep:
            drop_db(args.base, db)


def activity(base: str, sut: System, db: str) -> int:
    """Transactions committed or rolled back in ``db`` so far (pg_stat_database, read from
    another database so the reading is not counted); for Celery, the commands Redis has served
    (INFO commandstats: the whole server's, less the INFO itself)."""
    if not sut.uses_postgres:
        client = sut.redis()  # type: ignore[attr-defined]
        try:
            stats = client.info("commandstats")
        finally:
            client.close()
        return sum(int(v["calls"]) for v in stats.values())
    return int(
        query_value(
            base,
            ADMIN_DB,
            f"SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = '{db}'",
        )
    )


def load_pending(conninfo: str, rows: int, due_now: int, budget: float = 1e9) -> int:
    """Bulk-load pending timers straight into duetime's (migrated) table, 500k rows a statement;
    stop early (between statements) once ``budget`` seconds have passed. Returns rows loaded.

    Every ``rows // due_now``-th row was due in the past hour; the rest are due over the next 30
    days. Autovacuum is switched off on the table so "fresh" stays fresh. Where the schema has
    ``timer_keys`` (migration 12), each row's key goes there too, as the store writes it.
    """
    step = max(1, rows // due_now) if due_now else rows + 1
    deadline = time.monotonic() + budget
    loaded = 0
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("SET synchronous_commit = off")  # loading is not what is measured
        conn.execute("ALTER TABLE timers SET (autovacuum_enabled = off)")
        keyed = conn.execute("SELECT to_regclass('timer_keys') IS NOT NULL").fetchone()
        keys = (
            "INSERT INTO timer_keys (namespace, key, timer_id) SELECT namespace, key, id FROM made"
            if keyed and keyed[0]
            else "SELECT 1"
        )
        chunk = 500_000
        for start in range(1, rows + 1, chunk):
            if time.monotonic() > deadline:
                print(f"    ! loading stopped at {loaded:,} rows: --claim-load-budget spent")
                break
            stop = min(rows, start + chunk - 1)
            conn.execute(
                """
                WITH made AS (
                    INSERT INTO timers (namespace, key, type, payload, due_at, run_at, status,
                                        max_attempts, registered_at, updated_at)
                    SELECT 'default', 'k' || g, 'bench.noop', jsonb_build_object('n', g), at,
                           at, 'scheduled', 20, now(), now()
                    FROM generate_series(%(start)s::bigint, %(stop)s::bigint) AS g,
                    LATERAL (SELECT CASE WHEN g %% %(step)s = 0 AND g / %(step)s <= %(due)s
                        THEN now() - random() * interval '1 hour'
                        ELSE now() + interval '1 minute' + random() * interval '30 days' END AS at
                    ) AS t
                    RETURNING namespace, key, id
                )
                """
                + keys,
                {"start": start, "stop": stop, "step": step, "due": due_now},
            )
            loaded = stop
            print(f"      {stop:,} rows", flush=True)
        conn.execute("CHECKPOINT")
    return loaded


def time_claims(
    conninfo: str,
    claim_sql: str,
    iterations: int,
    prelude: str | None = None,
    budget: float = 300.0,
) -> tuple[list[float], list[int], list[tuple[str, str]], list[float], list[float]]:
    """Run the store's claim_due statement as the store does: psycopg with its default
    prepare threshold (server-side prepared after 5 runs, so PostgreSQL may switch to a generic
    plan), in autocommit — or, when the store sends ``prelude`` (claims.sql's
    ``claim_in_order``) first, with it in one pipeline (one round trip, one implicit
    transaction), timed whole. Each timed claim is followed by one taken apart: the same
    statements in an explicit transaction, the claim statement timed from its sending to its
    last row, and the COMMIT (the WAL flush) timed on its own. Returns the whole timings (ms),
    the rows each claim got, two plans (the first execution's, and the prepared statement's
    after the timed runs: the plan the store really ends up with), and the statement and commit
    timings (ms)."""
    node = "bench-claim"
    try:  # the subscription filter's parameters, from the store itself when it has them
        from duetime.store.postgres.working import claim_params

        filter_params: dict[str, Any] = claim_params(["bench.noop"])
    except ImportError:
        filter_params = {"types": ["bench.noop"]}

    def params() -> dict[str, Any]:
        now = datetime.now(UTC)
        return {
            "namespace": "default",
            **filter_params,  # a worker claims the types it has handlers for
            "now": now,
            "limit": 100,
            "node_id": node,
            "lease_until": now + timedelta(seconds=30),
        }

    times: list[float] = []
    got: list[int] = []
    plans: list[tuple[str, str]] = []
    statement: list[float] = []
    commits: list[float] = []
    deadline = time.monotonic() + budget
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("SET statement_timeout = '120s'")  # a bound, not part of the measure

        @contextlib.contextmanager
        def as_the_store() -> Iterator[None]:
            if prelude is None:
                yield
                return
            with conn.transaction():
                conn.execute(prelude, PRELUDE_PARAMS)
                yield

        with as_the_store():
            rows = conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + claim_sql, params()).fetchall()
        plans.append(("first execution (custom plan)", "\n".join(r[0] for r in rows)))
        for _ in range(iterations):
            if time.monotonic() > deadline:
                print(f"    ! claims stopped after {len(times)}: time budget spent")
                break
            p = params()
            started = time.perf_counter()
            if prelude is None:
                claimed = conn.execute(claim_sql, p).fetchall()
            else:
                with conn.pipeline() as pipeline:
                    conn.execute(prelude, PRELUDE_PARAMS)
                    cur = conn.execute(claim_sql, p)
                    pipeline.sync()
                    claimed = cur.fetchall()
            times.append((time.perf_counter() - started) * 1000)
            got.append(len(claimed))
            p = params()
            conn.execute("BEGIN")
            if prelude is not None:
                conn.execute(prelude, PRELUDE_PARAMS)
            started = time.perf_counter()
            conn.execute(claim_sql, p).fetchall()
            statement.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            conn.execute("COMMIT")
            commits.append((time.perf_counter() - started) * 1000)
        prepared = conn.execute(
            "SELECT name, generic_plans, custom_plans FROM pg_prepared_statements "
            "WHERE statement LIKE '%%claimed AS (%%'"
        ).fetchone()
        if prepared is not None:
            name, generic, custom = prepared
            order = list(dict.fromkeys(re.findall(r"%\((\w+)\)s", claim_sql)))
            p = params()
            args = ", ".join(["%s"] * len(order))
            cur = psycopg.ClientCursor(conn)
            with as_the_store():
                cur.execute(
                    f"EXPLAIN (ANALYZE, BUFFERS) EXECUTE {name}({args})", [p[k] for k in order]
                )
                explained = cur.fetchall()
            label = (
                f"as prepared after {iterations} runs "
                f"(generic plans {generic}, custom plans {custom})"
            )
            plans.append((label, "\n".join(r[0] for r in explained)))
    return times, got, plans, statement, commits


# -- the child process -----------------------------------------------------------------------
def child_main(args: argparse.Namespace) -> None:
    cls = load(args.child)
    sut = cls(args.base)
    fd = os.open(args.child_counter, os.O_RDWR)
    mm = mmap.mmap(fd, 0)
    counts = memoryview(mm).cast("q")
    slot = args.child_slot
    late: list[float] = []
    keep = args.child_out is not None
    os.environ["DTBENCH_COUNTER"] = args.child_counter  # for a worker in a process of its own
    os.environ["DTBENCH_SLOT"] = str(slot)

    def record(due: float | None) -> None:
        if keep and due is not None:
            late.append((time.time() - due) * 1000)
        counts[slot] += 1

    async def main() -> None:
        loop = asyncio.get_running_loop()
        stop, go = asyncio.Event(), asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)

        async def read_go() -> None:
            line = await loop.run_in_executor(None, sys.stdin.readline)
            (go if line.strip() == "go" else stop).set()

        reader = asyncio.create_task(read_go())

        def ready() -> None:
            print("ready", flush=True)

        await sut.run_worker(
            args.child_db,
            concurrency=args.concurrency,
            batch_size=args.batch_size,
            record=record,
            ready=ready,
            go=go,
            stop=stop,
        )
        reader.cancel()

    runner: Callable[[Any], Any] = asyncio.run
    if getattr(sys.modules.get(cls.__module__), "WANTS_UVLOOP", False):
        try:
            import uvloop

            runner = uvloop.run
        except ImportError:
            pass
    status = 0
    try:
        runner(main())
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        status = 1
    if keep:
        Path(args.child_out).write_text(json.dumps(late + sut.recorded_elsewhere()))
    counts.release()
    mm.close()
    os._exit(status)  # at once: the stdin reader thread may still be blocked in readline


# -- main ------------------------------------------------------------------------------------
def server_facts(base: str) -> str:
    with psycopg.connect(f"{base}/{ADMIN_DB}", autocommit=True) as conn:
        version = conn.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
        facts = {
            name: conn.execute(f"SHOW {name}").fetchone()[0]  # type: ignore[index]
            for name in ("shared_buffers", "synchronous_commit", "fsync", "autovacuum")
        }
    return f"PostgreSQL {version} (" + ", ".join(f"{k}={v}" for k, v in facts.items()) + ")"


def source_state() -> str:
    """Which duetime code ran: commit, and a digest of the worker + PostgreSQL store files
    (others edit them while benchmarks run, so the commit alone does not say). The package is
    the one imported, so a copy put first on PYTHONPATH (an older version) is named as such."""
    import duetime

    root = Path(__file__).resolve().parent.parent
    src = Path(duetime.__file__).resolve().parent
    worker = (
        [src / "worker.py"] if (src / "worker.py").exists() else sorted(src.glob("worker/*.py"))
    )
    facade = [src / "app.py"] if (src / "app.py").exists() else sorted(src.glob("app/*.py"))
    files = [*worker, *facade, *sorted((src / "store" / "postgres").rglob("*.*"))]
    digest = hashlib.sha1()
    for path in files:
        if path.suffix in (".py", ".sql"):
            digest.update(path.read_bytes())
    if not src.is_relative_to(root):
        return f"duetime package at {src}; worker/store digest {digest.hexdigest()[:10]}"
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--", "src"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        head, dirty = "?", ""
    state = " + uncommitted changes" if dirty else ""
    return f"commit {head}{state}; worker/store digest {digest.hexdigest()[:10]}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="smaller numbers (a few minutes)")
    parser.add_argument(
        "--metrics",
        action="store_true",
        help="also run duetime_metrics: duetime with its Prometheus metrics on",
    )
    parser.add_argument(
        "--sealed",
        action="store_true",
        help="also run duetime_sealed: duetime with every payload sealed at rest",
    )
    parser.add_argument(
        "--tracing",
        action="store_true",
        help="also run duetime_tracing and duetime_sampled: duetime with OpenTelemetry spans "
        "(SDK, batch processor), every trace or 10%% of them sampled",
    )
    parser.add_argument(
        "--only",
        default=",".join(default_systems()),
        help="systems: " + ",".join(SYSTEMS) + " (default: those installed, celery only asked)",
    )
    parser.add_argument(
        "--scenarios",
        default="immediate,mass,lateness,claim",
        help="immediate,mass,lateness,claim,idle; enqueue: (a)'s enqueue alone (--mass N)",
    )
    parser.add_argument(
        "--tables", default="fresh,analysed", help="fresh,analysed (mass, immediate)"
    )
    parser.add_argument(
        "--base", default=DEFAULT_BASE, help=f"server URL, no database ({DEFAULT_BASE})"
    )
    parser.add_argument("--workers", type=int, default=1, help="worker processes per system (1)")
    parser.add_argument(
        "--concurrency", type=int, default=100, help="jobs in flight per worker (100)"
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        default=500,
        help="duetime batch_size; pgqueuer gets min(this, concurrency/2)",
    )
    parser.add_argument("--mass", type=int, help="(a) jobs due at one instant (100,000)")
    parser.add_argument("--immediate", type=int, help="(c) jobs due now (50,000)")
    parser.add_argument("--late-n", type=int, help="(b) jobs (5,000)")
    parser.add_argument("--late-seconds", type=float, help="(b) spread (20 s)")
    parser.add_argument(
        "--late-grace", type=float, default=15.0, help="(b) wait after the last due"
    )
    parser.add_argument("--lateness-target", type=float, default=10.0, help="(b) p99 target, ms")
    parser.add_argument("--idle-timers", type=int, default=10_000, help="(f) pending (10,000)")
    parser.add_argument("--idle-seconds", type=float, default=30.0, help="(f) measured (30 s)")
    parser.add_argument(
        "--idle-settle", type=float, default=12.0, help="(f) wait after enqueueing (12 s)"
    )
    parser.add_argument("--claim-rows", type=int, help="(e) pending timers (10,000,000)")
    parser.add_argument("--claim-iterations", type=int, help="(e) timed claims per phase (1000)")
    parser.add_argument(
        "--claim-due-fraction", type=float, default=0.05, help="(e) share already due"
    )
    parser.add_argument(
        "--claim-load-budget",
        type=float,
        default=420.0,
        help="(e) stop bulk-loading after this many seconds (420) and measure what is there",
    )
    parser.add_argument("--lead", type=float, help="(a)/(b) seconds from enqueue start to due")
    parser.add_argument("--timeout", type=float, help="bound on one drain, s (60; quick 45)")
    parser.add_argument(
        "--pgq-driver",
        choices=("auto", "asyncpg", "psycopg"),
        default="auto",
        help="pgqueuer's driver (auto: asyncpg when installed)",
    )
    parser.add_argument(
        "--duetime-params",
        default="",
        help="extra duetime URL query parameters (experiments), e.g. pool_max=20",
    )
    parser.add_argument(
        "--duetime-limit",
        default="",
        help="a flow control limit on duetime's job type, e.g. concurrency=100000,rate=1000000/s "
        "(the limit's overhead)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run mass, immediate and lateness this many times, the systems in turn, and report "
        "each figure's median (1)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the dtbench_* databases")
    parser.add_argument(
        "--db-prefix",
        default=DB_PREFIX,
        help=f"the databases' names begin with this ({DB_PREFIX}): two runs at once on one "
        "server need two prefixes",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--child-db", help=argparse.SUPPRESS)
    parser.add_argument("--child-counter", help=argparse.SUPPRESS)
    parser.add_argument("--child-slot", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--child-out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_main(args)
        return
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # report what was measured
    os.environ["PG_BENCH_PGQ_DRIVER"] = args.pgq_driver
    os.environ["PG_BENCH_DUETIME_PARAMS"] = args.duetime_params
    os.environ["PG_BENCH_DUETIME_LIMIT"] = args.duetime_limit

    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    quick = args.quick
    systems = [s.strip() for s in args.only.split(",") if s.strip()]
    systems += [
        s
        for s, wanted in [
            ("duetime_metrics", args.metrics),
            ("duetime_tracing", args.tracing),
            ("duetime_sampled", args.tracing),
            ("duetime_sealed", args.sealed),
        ]
        if wanted and s not in systems
    ]
    for s in systems:
        if s not in SYSTEMS:
            parser.error(f"unknown system {s!r} (known: {', '.join(SYSTEMS)})")
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    tables = [t.strip() for t in args.tables.split(",") if t.strip()]
    n_mass = args.mass or (20_000 if quick else 100_000)
    n_now = args.immediate or (10_000 if quick else 50_000)
    late_n = args.late_n or (1_000 if quick else 5_000)
    late_s = args.late_seconds or (5.0 if quick else 20.0)
    claim_rows = args.claim_rows or (500_000 if quick else 10_000_000)
    claim_iter = args.claim_iterations or (200 if quick else 1000)
    args.timeout = args.timeout or (45.0 if quick else 60.0)

    python = Path(sys.executable)
    with contextlib.suppress(ValueError):  # the venv's python, as the README names it
        python = Path(sys.prefix).relative_to(Path.cwd()) / "bin" / python.name
    command = " ".join(shlex.quote(str(a)) for a in [python, *sys.argv])
    print(f"$ {command}")
    header = [
        f"python {platform.python_version()}, {os.cpu_count()} CPUs, {server_facts(args.base)}",
        f"load average at start: {os.getloadavg()[0]:.2f} (other work on the machine skews rates)",
        f"{args.workers} worker process(es) per system, concurrency {args.concurrency}, "
        f"duetime batch_size {args.batch_size}",
    ]
    if args.rounds > 1:
        header.append(
            f"{args.rounds} rounds of mass, immediate and lateness, the systems in turn: "
            "each figure is the median of its runs"
        )
    header.append(f"duetime source: {source_state()}")
    report = Report(systems)
    for name in systems:
        header.append("  " + load(name)(args.base).describe())
    print("\n".join(header), flush=True)
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="duetime-pgbench-") as tmpname:
        bench = Bench(args, report, Path(tmpname))
        try:
            for scenario in scenarios:
                print(f"\n== {scenario}", flush=True)
                if scenario == "claim":
                    if "duetime" in systems:
                        try:
                            bench.claim(claim_rows, claim_iter)
                        except Exception as exc:  # report it and go on
                            print(f"    ! claim failed: {exc!r}", flush=True)
                    continue
                for tab in tables if scenario in ("mass", "immediate") else ["fresh"]:
                    runs = [(r, s) for r in range(1, args.rounds + 1) for s in systems]
                    for round_number, name in runs:
                        if scenario not in STORE_SCENARIOS.get(name, (scenario,)):
                            continue
                        loadavg = ", ".join(f"{v:.2f}" for v in os.getloadavg())
                        print(
                            f"  -- round {round_number}, {name}: load average {loadavg}", flush=True
                        )
                        try:
                            if scenario == "mass":
                                bench.mass(name, n_mass, tab)
                            elif scenario == "immediate":
                                bench.immediate(name, n_now, tab)
                            elif scenario == "enqueue":
                                bench.enqueue_only(name, n_mass)
                            elif scenario == "lateness":
                                bench.lateness(name, late_n, late_s)
                            elif scenario == "idle":
                                bench.idle(name, args.idle_timers, args.idle_seconds)
                            else:
                                parser.error(f"unknown scenario {scenario!r}")
                        except Exception as exc:  # report it and go on with the others
                            print(f"    ! {name} {scenario} ({tab}) failed: {exc!r}", flush=True)
        except KeyboardInterrupt:
            print("\ninterrupted: partial results follow", flush=True)
        finally:
            if not args.keep:  # only this run's databases: another run may be using others
                claim = ["claim"] if "claim" in scenarios and "duetime" in systems else []
                for name in [*systems, *claim]:
                    with contextlib.suppress(Exception):
                        drop_db(args.base, args.db_prefix + name)
    elapsed = time.time() - started
    print(f"\n$ {command}")
    print("\n".join(header))
    print(f"(ran {elapsed / 60:.1f} min; load average at the end {os.getloadavg()[0]:.2f})\n")
    print(report.markdown())
    print("\nTargets:")
    print("\n".join(report.verdict_lines()))
    print("\nCosts a job, duetime ÷ its peers in this run:")
    print("\n".join(ratio_lines(report.figures)))


if __name__ == "__main__":
    main()
