"""One tenant hammering its most expensive listing while another creates timers, on one
``duetime serve`` process: how long the quiet tenant's creates take, alone and beside the noise.

Run by hand (not part of the test suite)::

    .venv/bin/python bench/tenant_isolation.py                      # both stores, 3 rounds
    .venv/bin/python bench/tenant_isolation.py --backend postgres --rounds 5
    .venv/bin/python bench/tenant_isolation.py --reads-per-namespace 64   # the gate opened wide

The noisy tenant holds as many limit rules as its cap allows (1,000) and due timers of a
hundred types held back under them, and lists every rule's status (a page of 1,000, the
largest) from several clients at once, without pause, in a process of its own. The quiet
tenant creates timers one after another, first alone, then beside the noise. Each round
prints both p50/p99/max and the noisy tenant's listings meanwhile; the verdict line compares
the noisy p99 with ``--bound-ms`` (100 ms, what docs/operating.md states) and with the
quiet tenant's p99 alone. ``--reads-per-namespace`` shows what the per-namespace gate buys:
with it opened wide, the noisy listings run side by side and the quiet tenant waits behind them.

The suite checks the mechanism without a clock (``tests/acceptance/test_tenant_turns.py``,
``tests/unit/test_namespace_gates.py``); the figures live here because they depend on the
machine and on whatever else runs on it.
"""

from __future__ import annotations

import argparse
import asyncio
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
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Event
from pathlib import Path

import httpx
from api_bench import database, duetime_command, free_port, load_average, uptime, wait_healthy

RULES = 1_000
HELD_TYPES = 100
HELD_PER_TYPE = 20
NOISY = "/v1/namespaces/noisy"
QUIET = "/v1/namespaces/quiet"


def server_env(url: str, reads_per_namespace: int | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUETIME_")}
    env["DUETIME_DATABASE_URL"] = url
    if reads_per_namespace is not None:
        env["DUETIME_READS_PER_NAMESPACE"] = str(reads_per_namespace)
    return env


async def fill_noisy(url: str) -> None:
    """The noisy tenant at its cap of rules, with due timers held back under them."""
    from duetime import AsyncApp
    from duetime.config import Settings
    from duetime.requests import TimerRequest

    async with AsyncApp(settings=Settings(database_url=url, namespace="noisy")) as app:
        await app.add_namespace("quiet")
        await app.pause("*")  # one rule of the cap; nothing runs: every timer stays held
        for start in range(0, RULES - 1, 111):
            end = min(start + 111, RULES - 1)
            await asyncio.gather(
                *(app.set_limit(f"t{i:04}.*", concurrency=1) for i in range(start, end))
            )
        for kind in range(HELD_TYPES):
            type = f"t{kind * (RULES // HELD_TYPES):04}.job"
            await app.schedule_many(
                [TimerRequest(type=type, delay="PT0S") for _ in range(HELD_PER_TYPE)]
            )


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
    base_url: str, token: str, clients: int, stop: Event, done: Synchronized[int], bad: Event
) -> None:
    """``clients`` noisy clients (threads), each listing every rule until ``stop``: in a
    process of its own, so its work on the answers slows only the server, not the quiet
    tenant's client."""

    def client_loop() -> None:
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=base_url, headers=headers, timeout=60) as client:
            while not stop.is_set():
                answer = client.get(f"{NOISY}/limits", params={"limit": 1000})
                if answer.status_code != 200 or len(answer.json()["items"]) != RULES:
                    bad.set()
                with done.get_lock():
                    done.value += 1

    threads = [threading.Thread(target=client_loop) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def one_round(
    base_url: str, noisy_token: str, quiet_token: str, args: argparse.Namespace, n: int
) -> tuple[float, float]:
    """One round: the quiet tenant alone, then beside the noise; (p99 alone, p99 noisy)."""
    headers = {"Authorization": f"Bearer {quiet_token}"}
    with httpx.Client(base_url=base_url, headers=headers) as client:
        load = load_average()
        alone = creates_timed(client, f"alone{n}", args.warm_up, args.creates)
        context = multiprocessing.get_context("fork")
        stop, bad = context.Event(), context.Event()
        listed: Synchronized[int] = context.Value("i", 0)
        noisy = context.Process(
            target=hammer, args=(base_url, noisy_token, args.clients, stop, listed, bad)
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
        raise SystemExit("a noisy listing failed or was incomplete")
    print(
        f"  round {n}: alone p50 {ms(statistics.median(alone))} / p99 {ms(p99(alone))} / "
        f"max {ms(max(alone))} ms · beside the noise p50 {ms(statistics.median(beside))} / "
        f"p99 {ms(p99(beside))} / max {ms(max(beside))} ms · {listings} listings in "
        f"{elapsed:.1f} s · load {load} → {load_average()}",
        flush=True,
    )
    return p99(alone), p99(beside)


def run_backend(backend: str, args: argparse.Namespace) -> bool:
    """All rounds on one store; True when every round's noisy p99 is under the bound."""
    print(f"{backend}:", flush=True)
    with (
        tempfile.TemporaryDirectory(prefix="duetime-tenants-") as tmp,
        database(backend, Path(tmp), args.pg_url) as url,
    ):
        workdir = Path(tmp)
        asyncio.run(fill_noisy(url))
        env = server_env(url, args.reads_per_namespace)
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
            base_url = f"http://127.0.0.1:{port}"
            rounds = [
                one_round(base_url, noisy_token, quiet_token, args, n)
                for n in range(1, args.rounds + 1)
            ]
        finally:
            process.terminate()
            process.wait(30)
    bound = args.bound_ms / 1000
    worst = max(beside for _, beside in rounds)
    ratios = ", ".join(f"{beside / alone:.2f}x" for alone, beside in rounds)
    held = worst < bound
    print(
        f"  {backend}: worst p99 beside the noise {ms(worst)} ms "
        f"({'under' if held else 'OVER'} the {args.bound_ms:g} ms bound); "
        f"p99 beside ÷ alone by round: {ratios}",
        flush=True,
    )
    return held


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
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
