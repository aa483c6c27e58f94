"""One tenant sending its most expensive requests while another creates timers, on one
``duetime serve`` process: how long the quiet tenant's creates take, alone and beside the noise.

Run by hand (not part of the test suite)::

    .venv/bin/python bench/tenant_isolation.py                      # both stores, every shape
    .venv/bin/python bench/tenant_isolation.py --backend postgres --rounds 5
    .venv/bin/python bench/tenant_isolation.py --shape big-timers --shape big-audit
    .venv/bin/python bench/tenant_isolation.py --reads-per-namespace 64   # the gate opened wide

The noisy tenant fills its namespace for one *shape* of expensive request, then sends it from
several clients at once, without pause, in a process of its own (``--shape``, repeatable;
every shape by default, each on a fresh database):

- ``rules``: as many limit rules as its cap allows (1,000), due timers of a hundred types
  held back under them, and the status of every rule (a page of 1,000, the largest);
- ``held-types``: 50,000 held types (``--held-types``) under a hundred rules and a pause,
  and the status of those rules: the counting is the database's, one row per rule back;
- ``big-timers``: 1,000 timers of 25 KB payloads (``--payload-kb``), and pages of 1,000 of
  them: 25 MB of JSON that ``page_bytes`` cuts into pages rendered off the event loop;
- ``big-audit``: 100 audit entries of 1,000 long keys each (bulk actions on a selection),
  and pages of 1,000 of them (26 MB).
- ``costly-rule``: nothing stored; previews of 100 occurrences of a rule as costly to expand
  as the server accepts (every Friday the 13th, walked day by day): bounded by the rule's
  expansion budget and computed off the event loop.

The quiet tenant creates timers one after another, first alone, then beside the noise. Each
round prints both p50/p99/max and the noisy tenant's requests meanwhile (and how many of them
the server refused as too expensive, ``503``); the verdict line compares the noisy p99 with
``--bound-ms`` (100 ms, what docs/operating.md states) and with the quiet tenant's p99 alone.
``--reads-per-namespace`` shows what the per-namespace gate buys: with it opened wide, the
noisy listings run side by side and the quiet tenant waits behind them.

The suite checks the mechanism without a clock (``tests/acceptance/test_tenant_turns.py``,
``tests/unit/test_namespace_gates.py``) and, at a smaller size, that the quiet tenant's
creates run while the noisy requests are in flight, an order of events rather than a figure
(``tests/acceptance/test_tenant_noise.py``, slow); the figures live here because they depend
on the machine and on whatever else runs on it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

import httpx
from api_bench import database, duetime_command, free_port, load_average, uptime, wait_healthy

RULES = 1_000
HELD_TYPES = 100
HELD_PER_TYPE = 20
NOISY = "/v1/namespaces/noisy"
QUIET = "/v1/namespaces/quiet"
PAGE = {"limit": 1000}


def server_env(
    url: str, reads_per_namespace: int | None, page_bytes: int | None = None
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUETIME_")}
    env["DUETIME_DATABASE_URL"] = url
    if reads_per_namespace is not None:
        env["DUETIME_READS_PER_NAMESPACE"] = str(reads_per_namespace)
    if page_bytes is not None:
        env["DUETIME_PAGE_BYTES"] = str(page_bytes)
    return env


@dataclass(frozen=True)
class Shape:
    """One kind of expensive request: what the noisy namespace holds (``fill``, given the
    noisy tenant's ``AsyncApp`` and the options), the request (``path`` with ``params``), and
    whether an answer is whole (``complete``, given its JSON)."""

    fill: Callable[[Any, argparse.Namespace], Awaitable[None]]
    path: str
    params: dict[str, Any]
    complete: Callable[[Any, argparse.Namespace], bool]


async def fill_rules(app: Any, args: argparse.Namespace) -> None:
    """The noisy tenant at its cap of rules, with due timers held back under them."""
    from duetime.requests import TimerRequest

    await app.limits.pause("*")  # one rule of the cap; nothing runs: every timer stays held
    for start in range(0, RULES - 1, 111):
        end = min(start + 111, RULES - 1)
        await asyncio.gather(
            *(app.limits.set(f"t{i:04}.*", concurrency=1) for i in range(start, end))
        )
    for kind in range(HELD_TYPES):
        type = f"t{kind * (RULES // HELD_TYPES):04}.job"
        await app.timers.schedule_many(
            [TimerRequest(type=type, delay="PT0S") for _ in range(HELD_PER_TYPE)]
        )


async def fill_held_types(app: Any, args: argparse.Namespace) -> None:
    """``--held-types`` types, a due timer each, held by a pause, under a hundred rules."""
    from duetime.requests import TimerRequest

    await app.limits.pause("*")
    await asyncio.gather(*(app.limits.set(f"h.{i:02}*", concurrency=1) for i in range(100)))
    for start in range(0, args.held_types, 1000):
        end = min(start + 1000, args.held_types)
        await app.timers.schedule_many(
            [TimerRequest(type=f"h.{n:05}", delay="PT0S") for n in range(start, end)]
        )


async def fill_big_timers(app: Any, args: argparse.Namespace) -> None:
    """1,000 pending timers of ``--payload-kb`` KB payloads."""
    from duetime.requests import TimerRequest

    text = "x" * (args.payload_kb * 1024)
    for start in range(0, 1000, 100):
        await app.timers.schedule_many(
            [
                TimerRequest(type="big", delay="P1D", payload={"n": n, "text": text})
                for n in range(start, start + 100)
            ]
        )


async def fill_big_audit(app: Any, args: argparse.Namespace) -> None:
    """100 audit entries, each a bulk cancel of a selection of 1,000 keys of 255 characters."""
    from duetime.model import TimerFilter
    from duetime.model.audit import Actor

    operator = Actor("bench")
    for entry in range(100):
        keys = [f"{entry:03}-{n:04}-".ljust(255, "k") for n in range(1000)]
        await app.timers.bulk("cancel", TimerFilter(), keys=keys, actor=operator)


async def fill_nothing(app: Any, args: argparse.Namespace) -> None:
    """A preview stores nothing: the work is all in the request."""


COSTLY_RULE = "FREQ=DAILY;BYMONTHDAY=13;BYDAY=FR"
"""Among the costliest rules the server accepts: every Friday the 13th, found by walking every
day (its hundred occurrences lie some sixty years apart from the first, about half the
expansion budget). Rules costlier still are refused (422) before they are walked."""


def _answered(body: Any, args: argparse.Namespace) -> bool:
    return isinstance(body, dict) and bool(body.get("items"))


SHAPES: dict[str, Shape] = {
    "rules": Shape(
        fill_rules,
        f"{NOISY}/limits",
        PAGE,
        lambda body, args: len(body["items"]) == RULES,
    ),
    "held-types": Shape(
        fill_held_types,
        f"{NOISY}/limits",
        PAGE,
        lambda body, args: len(body["items"]) == 101,
    ),
    "big-timers": Shape(fill_big_timers, f"{NOISY}/timers", PAGE, _answered),
    "big-audit": Shape(fill_big_audit, f"{NOISY}/audit", PAGE, _answered),
    "costly-rule": Shape(
        fill_nothing,
        "/v1/preview",
        {"rrule": COSTLY_RULE, "dtstart": "2026-01-01T00:00", "timezone": "UTC", "count": 100},
        lambda body, args: len(body["occurrences"]) == 100,
    ),
}


async def fill_noisy(url: str, shape: Shape, args: argparse.Namespace) -> None:
    """The noisy namespace filled for ``shape``; the quiet one created empty."""
    from duetime import AsyncApp
    from duetime.config import Settings

    async with AsyncApp(settings=Settings(database_url=url, namespace="noisy")) as app:
        await app.namespaces.add("quiet")
        await shape.fill(app, args)


def token(workdir: Path, env: dict[str, str], namespace: str) -> str:
    made = subprocess.run(
        [*duetime_command(), "tokens", "create", "--namespace", namespace, "--json"],
        cwd=workdir,
        env=env,
        capture_output=True,
        check=True,
    )
    secret: str = json.loads(made.stdout)["token"]
    return secret


def p99(latencies: list[float]) -> float:
    return statistics.quantiles(latencies, n=100, method="inclusive")[98]


def creates_timed(client: httpx.Client, prefix: str, warm_up: int, count: int) -> list[float]:
    """Seconds each of ``count`` timer creates took, one after another (after ``warm_up``)."""
    took: list[float] = []
    for n in range(warm_up + count):
        body = {"key": f"{prefix}-{n}", "type": "quiet.tick", "delay": "PT1H"}
        started = time.perf_counter()
        answer = client.post(f"{QUIET}/timers", json=body, timeout=60)
        elapsed = time.perf_counter() - started
        if answer.status_code != 201:
            raise SystemExit(f"a quiet create failed: {answer.status_code} {answer.text}")
        if n >= warm_up:
            took.append(elapsed)
    return took


def hammer(
    base_url: str,
    token: str,
    shape: Shape,
    args: argparse.Namespace,
    stop: Event,
    done: Synchronized[int],
    busy: Synchronized[int],
    bad: Event,
) -> None:
    """``args.clients`` noisy clients (threads), each sending the shape's request until
    ``stop``: in a process of its own, so its work on the answers slows only the server, not
    the quiet tenant's client. A ``503`` (the request ran past its budget: the server ended
    it) is counted in ``busy``; any other failure, or an incomplete answer, sets ``bad``."""

    def client_loop() -> None:
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=base_url, headers=headers, timeout=60) as client:
            while not stop.is_set():
                answer = client.get(shape.path, params=shape.params)
                if answer.status_code == 503:
                    with busy.get_lock():
                        busy.value += 1
                elif answer.status_code != 200 or not shape.complete(answer.json(), args):
                    bad.set()
                with done.get_lock():
                    done.value += 1

    threads = [threading.Thread(target=client_loop) for _ in range(args.clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


@dataclass(frozen=True)
class Round:
    """One round's figures: the quiet creates' seconds alone and beside the noise, and the
    noisy requests answered meanwhile (``busy`` of them 503)."""

    alone: list[float]
    beside: list[float]
    noisy: int
    busy: int


def one_round(
    base_url: str,
    noisy_token: str,
    quiet_token: str,
    shape: Shape,
    args: argparse.Namespace,
    n: int,
) -> Round:
    """One round: the quiet tenant alone, then beside the noise."""
    headers = {"Authorization": f"Bearer {quiet_token}"}
    with httpx.Client(base_url=base_url, headers=headers) as client:
        load = load_average()
        alone = creates_timed(client, f"alone{n}", args.warm_up, args.creates)
        context = multiprocessing.get_context("fork")
        stop, bad = context.Event(), context.Event()
        listed: Synchronized[int] = context.Value("i", 0)
        busy: Synchronized[int] = context.Value("i", 0)
        noisy = context.Process(
            target=hammer,
            args=(base_url, noisy_token, shape, args, stop, listed, busy, bad),
        )
        noisy.start()
        try:
            while listed.value < args.clients:  # the noisy tenant is at full tilt
                if not noisy.is_alive():
                    raise SystemExit("the noisy clients died")
                time.sleep(0.01)
            started = time.perf_counter()
            beside = creates_timed(client, f"noisy{n}", args.warm_up, args.creates)
            elapsed = time.perf_counter() - started
            listings = listed.value
        finally:
            stop.set()
            noisy.join(60)
    if bad.is_set():
        raise SystemExit("a noisy request failed or was incomplete")
    print(
        f"  round {n}: alone p50 {ms(statistics.median(alone))} / p99 {ms(p99(alone))} / "
        f"max {ms(max(alone))} ms · beside the noise p50 {ms(statistics.median(beside))} / "
        f"p99 {ms(p99(beside))} / max {ms(max(beside))} ms · {listings} noisy requests "
        f"({busy.value} answered 503) in {elapsed:.1f} s · load {load} → {load_average()}",
        flush=True,
    )
    return Round(alone, beside, listings, busy.value)


@contextlib.contextmanager
def noisy_server(
    backend: str, shape: Shape, args: argparse.Namespace
) -> Iterator[tuple[str, str, str]]:
    """A ``duetime serve`` on a fresh database filled for ``shape``: (its URL, the noisy
    tenant's token, the quiet tenant's)."""
    with (
        tempfile.TemporaryDirectory(prefix="duetime-tenants-") as tmp,
        database(backend, Path(tmp), args.pg_url) as url,
    ):
        workdir = Path(tmp)
        asyncio.run(fill_noisy(url, shape, args))
        env = server_env(url, args.reads_per_namespace, getattr(args, "page_bytes", None))
        noisy_token, quiet_token = token(workdir, env, "noisy"), token(workdir, env, "quiet")
        port = free_port()
        log = workdir / "serve.log"
        process = subprocess.Popen(
            [*duetime_command(), "serve", "--no-worker", "--port", str(port)],
            cwd=workdir,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=open(log, "wb"),  # noqa: SIM115 - lives as long as the server
        )
        try:
            wait_healthy(process, port, log)
            yield f"http://127.0.0.1:{port}", noisy_token, quiet_token
        finally:
            process.terminate()
            process.wait(30)


def run_shape(backend: str, name: str, args: argparse.Namespace) -> list[Round]:
    """Every round of one shape on one store."""
    print(f"{backend}, {name}:", flush=True)
    shape = SHAPES[name]
    with noisy_server(backend, shape, args) as (base_url, noisy_token, quiet_token):
        return [
            one_round(base_url, noisy_token, quiet_token, shape, args, n)
            for n in range(1, args.rounds + 1)
        ]


def run_backend(backend: str, args: argparse.Namespace) -> bool:
    """Every shape on one store; True when every round's noisy p99 is under the bound."""
    held = True
    bound = args.bound_ms / 1000
    for name in args.shape or list(SHAPES):
        rounds = run_shape(backend, name, args)
        worst = max(p99(r.beside) for r in rounds)
        ratios = ", ".join(f"{p99(r.beside) / p99(r.alone):.2f}x" for r in rounds)
        under = worst < bound
        held = held and under
        print(
            f"  {backend}, {name}: worst p99 beside the noise {ms(worst)} ms "
            f"({'under' if under else 'OVER'} the {args.bound_ms:g} ms bound); "
            f"p99 beside ÷ alone by round: {ratios}",
            flush=True,
        )
    return held


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument(
        "--shape",
        action="append",
        choices=list(SHAPES),
        help="The noisy tenant's request (repeatable; default: every shape).",
    )
    parser.add_argument("--held-types", type=int, default=50_000, help="held-types: types.")
    parser.add_argument("--payload-kb", type=int, default=25, help="big-timers: KB a payload.")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--creates", type=int, default=400, help="Timed creates a phase.")
    parser.add_argument("--warm-up", type=int, default=20, help="Untimed creates first.")
    parser.add_argument("--clients", type=int, default=4, help="Noisy clients listing at once.")
    parser.add_argument("--bound-ms", type=float, default=100.0)
    parser.add_argument(
        "--reads-per-namespace",
        type=int,
        help="The server's per-namespace read gate (default: the server's own, 1).",
    )
    parser.add_argument(
        "--page-bytes",
        type=int,
        help="The server's page_bytes (default: the server's own, 4 MiB).",
    )
    parser.add_argument(
        "--pg-url",
        default=os.environ.get("DUETIME_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test"),
    )
    args = parser.parse_args()
    print(f"$ {' '.join(shlex.quote(a) for a in [sys.executable, *sys.argv])}")
    import duetime

    print(f"duetime from {Path(duetime.__file__).parent}; {os.cpu_count()} CPUs")
    print(f"uptime at the start: {uptime()}", flush=True)
    backends = ("sqlite", "postgres") if args.backend == "both" else (args.backend,)
    held = [run_backend(backend, args) for backend in backends]
    print(f"uptime at the end: {uptime()}")
    sys.exit(0 if all(held) else 1)


if __name__ == "__main__":
    main()
