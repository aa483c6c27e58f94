"""Worker processes and the faults done to them, chosen by a seeded random generator.

- ``kill``: SIGKILL a running worker, start its slot again 0.2-2 s later (a new node id).
- ``stop``: SIGSTOP a running worker for 1.2-2 times the lease, then SIGCONT: its leases run out
  meanwhile and other workers rescue its timers; when it wakes, its late outcomes must be
  refused by the fences.
- ``dbrestart`` (PostgreSQL): stop the private cluster (``fast`` or ``immediate``, a crash)
  and start it again 0.5-3 s later.
- ``dropconn`` (PostgreSQL): ``pg_terminate_backend`` of every worker connection (their
  ``application_name`` starts with ``chaos-w``).
- ``failover`` (PostgreSQL, :mod:`bench.failover`): not random; once, at a set moment, the
  primary is killed (``pg_ctl stop -m immediate``) and its standby promoted.
- ``skew``: not an event; the slots' workers run under libfaketime for the whole run, slot 0
  ``+skew`` seconds, slot 1 ``-skew``, the others on the real clock.
"""

from __future__ import annotations

import glob
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.chaoslib.classify import FaultEvent, NodeFate

ROOT = Path(__file__).resolve().parents[2]
EVENT_FAULTS = ("kill", "stop", "dbrestart", "dropconn")
PG_ONLY = frozenset({"dbrestart", "dropconn"})


def now_us() -> int:
    return time.time_ns() // 1000


def faketime_library() -> str | None:
    """libfaketime's multi-threaded build, preloaded into a skewed worker: the worker is then
    the process started, so kill -9 and SIGSTOP reach it (a ``faketime`` wrapper would take
    them and leave the worker running on its own)."""
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketimeMT.so.1"))
    return found[0] if found else None


def faketime_problem() -> str | None:
    if faketime_library() is None:
        return "libfaketime is missing (Debian: apt-get install faketime)"
    return None


def with_params(url: str, **params: str) -> str:
    if url.startswith("sqlite:"):
        return url
    extra = "&".join(f"{name}={value}" for name, value in params.items())
    return f"{url}{'&' if '?' in url else '?'}{extra}"


class WorkerPool:
    """One worker process per slot, each slot with a fixed clock skew; every node it ever
    started is kept with its fate for the classification."""

    def __init__(
        self, url: str, folder: Path, clock: str, skews: list[float], options: list[str]
    ) -> None:
        self.url = url
        self.folder = folder
        self.clock = clock
        self.skews = skews
        self.options = options
        self.procs: dict[int, tuple[str, subprocess.Popen[bytes]]] = {}
        self.fates: dict[str, NodeFate] = {}
        self.stopped: set[int] = set()
        self._count = 0

    def start(self, slot: int) -> None:
        self._note_exit(slot)
        self._count += 1
        node = f"w{slot}-{self._count}"
        url = with_params(self.url, application_name=f"chaos-{node}", pool_max="4")
        command = [
            sys.executable, "-m", "bench.chaoslib.worker", "--url", url, "--node-id", node,
            "--records", str(self.folder), "--clock", self.clock, *self.options,
        ]  # fmt: skip
        skew = self.skews[slot]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), *sys.path)))}
        if skew:
            library = faketime_library()
            assert library is not None, faketime_problem()
            env.update(LD_PRELOAD=library, FAKETIME=f"{skew:+g}s")
        with (self.folder / f"{node}.stderr").open("wb") as stderr:
            proc = subprocess.Popen(
                command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=stderr
            )
        self.procs[slot] = (node, proc)
        self.fates[node] = NodeFate(node, skew, now_us())

    def start_all(self) -> None:
        for slot in range(len(self.skews)):
            self.start(slot)

    def running(self) -> list[int]:
        return [s for s, (_, p) in self.procs.items() if p.poll() is None and s not in self.stopped]

    def kill(self, slot: int) -> str:
        node, proc = self.procs[slot]
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        self.fates[node].killed_us = now_us()
        return node

    def pause(self, slot: int) -> str:
        node, proc = self.procs[slot]
        proc.send_signal(signal.SIGSTOP)
        self.stopped.add(slot)
        self.fates[node].stops.append((now_us(), 0))
        return node

    def resume(self, slot: int) -> None:
        node, proc = self.procs[slot]
        proc.send_signal(signal.SIGCONT)
        self.stopped.discard(slot)
        begin, _ = self.fates[node].stops[-1]
        self.fates[node].stops[-1] = (begin, now_us())

    def heal(self) -> None:
        """Every slot running again: stopped ones continued, dead ones started."""
        for slot in list(self.stopped):
            self.resume(slot)
        for slot, (_, proc) in list(self.procs.items()):
            if proc.poll() is not None:
                self.start(slot)

    def restart_exited(self) -> None:
        """Start again, as a supervisor would, each worker that ended by itself (its node is
        counted as a worker exit): a crash loop then shows as many exits, not one."""
        for slot, (node, proc) in list(self.procs.items()):
            if proc.poll() is not None and self.fates[node].killed_us is None:
                self.start(slot)

    def _note_exit(self, slot: int) -> None:
        """Record the slot's process as exited by itself if it ended and was never killed."""
        if slot not in self.procs:
            return
        node, proc = self.procs[slot]
        fate = self.fates[node]
        if proc.poll() is not None and fate.killed_us is None and fate.exited is None:
            fate.exited = proc.returncode

    def stop_all(self, grace: float = 15.0) -> None:
        for slot in self.procs:
            self._note_exit(slot)
        self.heal_stopped_only()
        for _, proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        for _, proc in self.procs.values():
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def heal_stopped_only(self) -> None:
        for slot in list(self.stopped):
            self.resume(slot)

    def stderr(self) -> str:
        parts = []
        for path in sorted(self.folder.glob("*.stderr")):
            text = path.read_text(errors="replace").strip()
            if text:
                parts.append(f"--- {path.stem} ---\n{text[-3000:]}")
        return "\n".join(parts)


class Injector:
    """Does one fault at a time at random moments (mean gap ``every`` seconds), seeded."""

    def __init__(
        self,
        pool: WorkerPool,
        faults: frozenset[str],
        rng: random.Random,
        lease: float,
        every: float,
        restart_db: Callable[[str, float], None] | None = None,
        drop_connections: Callable[[], int] | None = None,
        planned: Sequence[tuple[float, str, Callable[[], str]]] = (),
    ) -> None:
        """``planned``: (seconds after the start, kind, action returning the target): faults
        at set moments, besides the random ones."""
        self.pool = pool
        self.kinds = [k for k in EVENT_FAULTS if k in faults]
        self.rng = rng
        self.lease = lease
        self.every = every
        self.restart_db = restart_db
        self.drop_connections = drop_connections
        self.events: list[FaultEvent] = []
        self._later: list[tuple[float, Callable[[], Any]]] = []
        self._planned = sorted(planned, key=lambda item: item[0])

    def run(self, seconds: float, alive: Callable[[], bool]) -> None:
        """Inject until ``seconds`` pass (or ``alive`` says the producer is gone), then heal."""
        started = time.monotonic()
        deadline = started + seconds
        next_at = time.monotonic() + self.rng.expovariate(1 / self.every)
        while time.monotonic() < deadline and alive():
            self._due_later()
            self.pool.restart_exited()
            while self._planned and time.monotonic() >= started + self._planned[0][0]:
                _, kind, action = self._planned.pop(0)
                began = now_us()
                target = action()  # its instant: once done (a crash is then surely over)
                self.events.append(FaultEvent(kind, now_us(), target, began))
            if self.kinds and time.monotonic() >= next_at:
                self._one(self.rng.choice(self.kinds))
                next_at = time.monotonic() + self.rng.expovariate(1 / self.every)
            time.sleep(0.02)
        for _, action in self._later:
            action()
        self._later.clear()
        self.pool.heal()

    def _due_later(self) -> None:
        now = time.monotonic()
        for item in [x for x in self._later if x[0] <= now]:
            self._later.remove(item)
            item[1]()

    def _one(self, kind: str) -> None:
        running = self.pool.running()
        if kind in ("kill", "stop") and not running:
            return
        if kind == "kill":
            slot = self.rng.choice(running)
            node = self.pool.kill(slot)
            self._later.append((time.monotonic() + self.rng.uniform(0.2, 2.0), self._restart(slot)))
        elif kind == "stop":
            slot = self.rng.choice(running)
            node = self.pool.pause(slot)
            pause = self.lease * self.rng.uniform(1.2, 2.0)
            self._later.append((time.monotonic() + pause, lambda: self.pool.resume(slot)))
        elif kind == "dbrestart" and self.restart_db is not None:
            mode = self.rng.choice(("fast", "immediate"))
            node = f"database ({mode})"
            self.events.append(FaultEvent(kind, now_us(), node))
            self.restart_db(mode, self.rng.uniform(0.5, 3.0))
            return
        elif kind == "dropconn" and self.drop_connections is not None:
            node = f"{self.drop_connections()} connections"
        else:
            return
        self.events.append(FaultEvent(kind, now_us(), node))

    def _restart(self, slot: int) -> Callable[[], None]:
        def restart() -> None:
            if self.pool.procs[slot][1].poll() is not None:
                self.pool.start(slot)

        return restart
