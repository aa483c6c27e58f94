"""duetime on SQLite: scheduling rate, mass-due throughput and firing lateness.

Run by hand (not part of the test suite)::

    .venv/bin/python bench/sqlite_bench.py            # full run (~1-2 minutes)
    .venv/bin/python bench/sqlite_bench.py --quick    # smaller numbers (~20 s)

Every phase uses a fresh database file in a temporary directory, real time and the default
``Settings`` (WAL, ``synchronous=FULL``) unless a flag overrides them. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shlex
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from duetime import AsyncApp, Event, TimerRequest

MASS_TYPE = "bench.noop"
LATE_TYPE = "bench.late"


@dataclass
class Row:
    phase: str
    what: str
    value: str
    note: str = ""


@dataclass
class Report:
    rows: list[Row] = field(default_factory=list)

    def add(self, phase: str, what: str, value: str, note: str = "") -> None:
        self.rows.append(Row(phase, what, value, note))
        print(f"  {phase:<10} {what:<44} {value:>14}  {note}", flush=True)

    def table(self) -> str:
        widths = [
            max(len(h), *(len(getattr(r, a)) for r in self.rows))
            for h, a in (
                ("phase", "phase"),
                ("measure", "what"),
                ("result", "value"),
                ("note", "note"),
            )
        ]
        line = "+".join("-" * (w + 2) for w in widths)
        out = [line]
        header = ("phase", "measure", "result", "note")
        out.append("|".join(f" {h:<{w}} " for h, w in zip(header, widths, strict=True)))
        out.append(line)
        for r in self.rows:
            cells = (r.phase, r.what, r.value, r.note)
            out.append(
                "|".join(
                    f" {c:>{w}} " if i == 2 else f" {c:<{w}} "
                    for i, (c, w) in enumerate(zip(cells, widths, strict=True))
                )
            )
        out.append(line)
        return "\n".join(out)


def _settings_overrides(args: argparse.Namespace) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    if args.concurrency is not None:
        overrides["concurrency"] = args.concurrency
    if args.batch_size is not None:
        overrides["batch_size"] = args.batch_size
    return overrides


def _fresh_url(tmp: Path, name: str) -> str:
    return f"sqlite:///{tmp / name}"


class DonePoller:
    """Watches a database from its own connection until no timer is pending or running."""

    def __init__(self, url: str, namespace: str = "default") -> None:
        self.path = url[len("sqlite:///") :]
        self.namespace = namespace
        self.finished_at: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        conn = sqlite3.connect(self.path, isolation_level=None)
        try:
            while not self._stop.is_set():
                pending = conn.execute(
                    "SELECT EXISTS (SELECT 1 FROM timers WHERE namespace = ? "
                    "AND status IN ('scheduled', 'retrying'))",
                    (self.namespace,),
                ).fetchone()[0]
                running = (
                    0
                    if pending
                    else conn.execute(
                        "SELECT EXISTS (SELECT 1 FROM timers WHERE status = 'running')"
                    ).fetchone()[0]
                )
                if not pending and not running:
                    self.finished_at = time.time()
                    return
                time.sleep(0.01)
        finally:
            conn.close()

    def wait(self, timeout: float) -> float | None:
        self._thread.join(timeout)
        self._stop.set()
        return self.finished_at


def _count_done(url: str) -> int:
    conn = sqlite3.connect(url[len("sqlite:///") :])
    try:
        return int(conn.execute("SELECT count(*) FROM timers WHERE status = 'done'").fetchone()[0])
    finally:
        conn.close()


# -- (a) scheduling rate ---------------------------------------------------------------------
async def bench_schedule(url: str, n_many: int, n_single: int, report: Report) -> float:
    app = AsyncApp(url)
    await app.open()
    far = datetime.now(UTC) + timedelta(days=1)
    try:
        started = time.perf_counter()
        for start in range(0, n_many, 1000):
            requests = [
                TimerRequest(MASS_TYPE, {"i": i}, at=far, key=f"many-{i}")
                for i in range(start, min(start + 1000, n_many))
            ]
            await app.timers.schedule_many(requests)
        many_rate = n_many / (time.perf_counter() - started)
        report.add(
            "schedule", "schedule_many, batches of 1000", f"{many_rate:,.0f}/s", f"{n_many:,}"
        )

        started = time.perf_counter()
        for i in range(n_single):
            await app.schedule(MASS_TYPE, {"i": i}, at=far, key=f"one-{i}")
        single_rate = n_single / (time.perf_counter() - started)
        report.add(
            "schedule", "schedule(), one call per timer", f"{single_rate:,.0f}/s", f"{n_single:,}"
        )
    finally:
        await app.close()
    return many_rate


async def _schedule_at(url: str, n: int, due: Callable[[int], datetime], type: str) -> None:
    app = AsyncApp(url)
    await app.open()
    try:
        for start in range(0, n, 1000):
            requests = [
                TimerRequest(type, None, at=due(i), key=f"t-{i}")
                for i in range(start, min(start + 1000, n))
            ]
            await app.timers.schedule_many(requests)
    finally:
        await app.close()


# -- (b) mass due ----------------------------------------------------------------------------
async def bench_mass_inprocess(
    url: str, n: int, lead: float, overrides: dict[str, Any], report: Report
) -> None:
    due_at = datetime.now(UTC) + timedelta(seconds=lead)
    await _schedule_at(url, n, lambda i: due_at, MASS_TYPE)
    if datetime.now(UTC) >= due_at:
        report.add("mass-due", "in-process: scheduling overran the lead", "n/a", "raise --lead")
        return
    app = AsyncApp(url, **overrides)
    calls = 0

    @app.handler(MASS_TYPE)
    async def noop(event: Event) -> None:
        nonlocal calls
        calls += 1

    await app.open()
    poller = DonePoller(url)
    worker = app.worker()
    task = asyncio.create_task(worker.run())
    try:
        await asyncio.sleep(max(0.0, (due_at - datetime.now(UTC)).total_seconds()))
        cpu = time.process_time()
        poller.start()
        finished = await asyncio.to_thread(poller.wait, 600)
        cpu = time.process_time() - cpu
    finally:
        worker.stop()
        await task
        await app.close()
    _report_mass(report, "in-process worker", n, due_at, finished, url)
    if finished is not None:
        report.add("mass-due", "in-process worker: CPU per timer", f"{cpu / n * 1e6:.1f} us", "")


def bench_mass_subprocess(
    url: str, n: int, lead: float, overrides: dict[str, Any], report: Report
) -> None:
    due_at = datetime.now(UTC) + timedelta(seconds=lead)
    asyncio.run(_schedule_at(url, n, lambda i: due_at, MASS_TYPE))
    if datetime.now(UTC) >= due_at:
        report.add("mass-due", "worker process: scheduling overran the lead", "n/a", "raise --lead")
        return
    child = _spawn_worker(url, MASS_TYPE, overrides, None)
    try:
        time.sleep(max(0.0, (due_at - datetime.now(UTC)).total_seconds()))
        poller = DonePoller(url)
        poller.start()
        finished = poller.wait(600)
    finally:
        _stop_worker(child)
    _report_mass(report, "separate worker process", n, due_at, finished, url)


def _report_mass(
    report: Report, label: str, n: int, due_at: datetime, finished: float | None, url: str
) -> None:
    done = _count_done(url)
    if finished is None or done != n:
        report.add("mass-due", f"{label}: did not finish", f"{done:,}/{n:,}", "")
        return
    seconds = finished - due_at.timestamp()
    report.add("mass-due", f"{label}: due instant -> all done", f"{seconds:.2f} s", f"{n:,} timers")
    report.add("mass-due", f"{label}: throughput", f"{n / seconds:,.0f}/s", "target ≥ 20,000/s")


# -- (c) lateness ----------------------------------------------------------------------------
def _spread(n: int, seconds: float, lead: float, seed: int = 7) -> list[datetime]:
    rng = random.Random(seed)
    base = datetime.now(UTC) + timedelta(seconds=lead)
    return sorted(base + timedelta(seconds=rng.uniform(0, seconds)) for _ in range(n))


async def bench_lateness_inprocess(
    url: str, n: int, seconds: float, overrides: dict[str, Any], report: Report
) -> None:
    dues = _spread(n, seconds, lead=1.5)
    await _schedule_at(url, n, lambda i: dues[i], LATE_TYPE)
    app = AsyncApp(url, **overrides)
    late_ms: list[float] = []

    @app.handler(LATE_TYPE)
    async def record(event: Event) -> None:
        late_ms.append((time.time() - event.due_at.timestamp()) * 1000)

    await app.open()
    worker = app.worker()
    task = asyncio.create_task(worker.run())
    poller = DonePoller(url)
    probe = LagProbe((dues[-1] - datetime.now(UTC)).total_seconds())
    try:
        await asyncio.sleep(max(0.0, (dues[-1] - datetime.now(UTC)).total_seconds()))
        poller.start()
        await asyncio.to_thread(poller.wait, 120)
    finally:
        worker.stop()
        await task
        await app.close()
    _report_lateness(report, "in-process worker", n, seconds, late_ms, probe.result())


def bench_lateness_subprocess(
    url: str, n: int, seconds: float, overrides: dict[str, Any], report: Report, tmp: Path
) -> None:
    dues = _spread(n, seconds, lead=2.5)
    asyncio.run(_schedule_at(url, n, lambda i: dues[i], LATE_TYPE))
    out = tmp / "lateness.json"
    child = _spawn_worker(url, LATE_TYPE, overrides, out)
    probe = LagProbe((dues[-1] - datetime.now(UTC)).total_seconds())
    try:
        time.sleep(max(0.0, (dues[-1] - datetime.now(UTC)).total_seconds()))
        poller = DonePoller(url)
        poller.start()
        poller.wait(120)
    finally:
        _stop_worker(child)
    late_ms = json.loads(out.read_text()) if out.exists() else []
    _report_lateness(report, "separate worker process", n, seconds, late_ms, probe.result())


_LAG_PROBE = """
import asyncio, json, sys
async def main(seconds):
    loop = asyncio.get_running_loop()
    lags, end = [], loop.time() + seconds
    while loop.time() < end:
        started = loop.time()
        await asyncio.sleep(0.002)
        lags.append((loop.time() - started - 0.002) * 1000)
    print(json.dumps(lags))
asyncio.run(main(float(sys.argv[1])))
"""


class LagProbe:
    """A separate idle process measuring its own event-loop wake-up lag during a phase: how
    late the machine itself wakes a sleeper while the benchmark runs (the noise floor)."""

    def __init__(self, seconds: float) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _LAG_PROBE, str(seconds)], stdout=subprocess.PIPE, text=True
        )

    def result(self) -> str:
        out, _ = self.proc.communicate(timeout=120)
        lags = sorted(json.loads(out))
        p99 = lags[min(len(lags) - 1, int(len(lags) * 0.99))]
        return f"idle process on this machine meanwhile: p99 {p99:.2f} ms, max {lags[-1]:.2f} ms"


def _report_lateness(
    report: Report,
    label: str,
    n: int,
    seconds: float,
    late_ms: list[float],
    noise: str = "",
) -> None:
    if len(late_ms) != n:
        report.add("lateness", f"{label}: handler ran", f"{len(late_ms):,}/{n:,}", "incomplete")
        if not late_ms:
            return
    q = statistics.quantiles(late_ms, n=100, method="inclusive")
    note = f"{n:,} timers over {seconds:g} s"
    report.add("lateness", f"{label}: p50 (handler start - due_at)", f"{q[49]:.2f} ms", note)
    report.add("lateness", f"{label}: p95", f"{q[94]:.2f} ms")
    report.add("lateness", f"{label}: p99", f"{q[98]:.2f} ms", "target ≤ 5 ms")
    report.add("lateness", f"{label}: max", f"{max(late_ms):.2f} ms", noise)


# -- the worker child process ----------------------------------------------------------------
def _spawn_worker(
    url: str, type: str, overrides: dict[str, Any], lateness_out: Path | None
) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, __file__, "--child-worker", url, "--child-type", type]
    if lateness_out is not None:
        cmd += ["--child-lateness-out", str(lateness_out)]
    for name, value in overrides.items():
        cmd += [f"--{name.replace('_', '-')}", str(value)]
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE)
    assert child.stdout is not None
    line = child.stdout.readline()  # "ready" once the worker is up
    if line.strip() != b"ready":
        child.kill()
        raise RuntimeError(f"worker process did not start: {line!r}")
    return child


def _stop_worker(child: subprocess.Popen[bytes]) -> None:
    child.send_signal(signal.SIGTERM)
    try:
        child.wait(60)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


def child_worker(args: argparse.Namespace) -> None:
    app = AsyncApp(args.child_worker, **_settings_overrides(args))
    late_ms: list[float] = []

    if args.child_lateness_out:

        @app.handler(args.child_type)
        async def record(event: Event) -> None:
            late_ms.append((time.time() - event.due_at.timestamp()) * 1000)

    else:

        @app.handler(args.child_type)
        async def noop(event: Event) -> None:
            return None

    async def main() -> None:
        await app.open()
        worker = app.worker()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, worker.stop)
        task = asyncio.create_task(worker.run())
        await asyncio.sleep(0.2)  # registered, rescued, sleeping until the first due instant
        print("ready", flush=True)
        await task
        await app.close()

    asyncio.run(main())
    if args.child_lateness_out:
        Path(args.child_lateness_out).write_text(json.dumps(late_ms))


# -- how noisy is this machine right now? ----------------------------------------------------
def _percentiles(values: list[float]) -> tuple[float, float]:
    values = sorted(values)
    return values[len(values) // 2], values[min(len(values) - 1, int(len(values) * 0.99))]


def probe_environment(tmp: Path) -> str:
    """fdatasync latency of the temp dir's disk and the wake-up lag of an idle asyncio loop:
    the floor under every figure below (other processes share the CPUs and the disk)."""
    path = tmp / "probe"
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        os.write(fd, b"\0" * 4096 * 64)
        os.fsync(fd)
        syncs = []
        for i in range(200):
            os.pwrite(fd, b"x" * 4096, (i % 64) * 4096)
            started = time.perf_counter()
            os.fdatasync(fd)
            syncs.append((time.perf_counter() - started) * 1000)
    finally:
        os.close(fd)
        path.unlink()

    async def lags() -> list[float]:
        loop = asyncio.get_running_loop()
        out = []
        for _ in range(1000):
            started = loop.time()
            await asyncio.sleep(0.001)
            out.append((loop.time() - started - 0.001) * 1000)
        return out

    sync50, sync99 = _percentiles(syncs)
    lag50, lag99 = _percentiles(asyncio.run(lags()))
    return (
        f"fdatasync p50 {sync50:.2f} ms / p99 {sync99:.2f} ms; "
        f"idle event-loop wake-up lag p50 {lag50:.2f} ms / p99 {lag99:.2f} ms"
    )


# -- main ------------------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller numbers, ~20 s in all")
    parser.add_argument(
        "--phases", default="schedule,mass,lateness", help="comma list: schedule,mass,lateness"
    )
    parser.add_argument(
        "--worker",
        choices=("inprocess", "process", "both"),
        default="both",
        help="where the worker runs for mass/lateness (default both)",
    )
    parser.add_argument("--mass", type=int, help="timers due at one instant (default 100,000)")
    parser.add_argument("--lead", type=float, help="seconds between scheduling and the due instant")
    parser.add_argument("--late-n", type=int, help="timers in the lateness run (default 5,000)")
    parser.add_argument("--late-seconds", type=float, help="lateness spread (default 20 s)")
    parser.add_argument("--concurrency", type=int, help="override Settings.concurrency")
    parser.add_argument("--batch-size", type=int, help="override Settings.batch_size")
    parser.add_argument("--child-worker", help=argparse.SUPPRESS)
    parser.add_argument("--child-type", help=argparse.SUPPRESS)
    parser.add_argument("--child-lateness-out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_worker:
        child_worker(args)
        return

    quick = args.quick
    n_many = 20_000 if quick else 100_000
    n_single = 1_000 if quick else 5_000
    n_mass = args.mass or (20_000 if quick else 100_000)
    late_n = args.late_n or (1_000 if quick else 5_000)
    late_seconds = args.late_seconds or (5.0 if quick else 20.0)
    phases = set(args.phases.split(","))
    modes = ("inprocess", "process") if args.worker == "both" else (args.worker,)
    overrides = _settings_overrides(args)

    command = " ".join(shlex.quote(a) for a in [".venv/bin/python", *sys.argv])
    print(f"$ {command}")
    environment = (
        f"python {sys.version.split()[0]}, SQLite {sqlite3.sqlite_version}, "
        f"{os.cpu_count()} CPUs, settings overrides: {overrides or 'none'}"
    )
    print(environment, flush=True)
    load_before = os.getloadavg()[0]
    report = Report()
    schedule_rate = 20_000.0
    with tempfile.TemporaryDirectory(prefix="duetime-bench-") as name:
        tmp = Path(name)
        noise = probe_environment(tmp)
        print(f"machine right now: {noise}", flush=True)
        if "schedule" in phases:
            schedule_rate = asyncio.run(
                bench_schedule(_fresh_url(tmp, "schedule.db"), n_many, n_single, report)
            )
        lead = args.lead or (2.0 + 1.5 * n_mass / schedule_rate)
        if "mass" in phases:
            if "inprocess" in modes:
                asyncio.run(
                    bench_mass_inprocess(
                        _fresh_url(tmp, "mass-in.db"), n_mass, lead, overrides, report
                    )
                )
            if "process" in modes:
                bench_mass_subprocess(
                    _fresh_url(tmp, "mass-proc.db"), n_mass, lead, overrides, report
                )
        if "lateness" in phases:
            if "inprocess" in modes:
                asyncio.run(
                    bench_lateness_inprocess(
                        _fresh_url(tmp, "late-in.db"), late_n, late_seconds, overrides, report
                    )
                )
            if "process" in modes:
                bench_lateness_subprocess(
                    _fresh_url(tmp, "late-proc.db"), late_n, late_seconds, overrides, report, tmp
                )
    print()
    print(f"$ {command}")
    print(environment)
    print(f"machine at the start: {noise}")
    print(
        f"1-minute load average: {load_before:.2f} at the start, {os.getloadavg()[0]:.2f} at the "
        "end (other processes competing for the CPUs and the disk skew every figure)"
    )
    print(report.table())


if __name__ == "__main__":
    main()
