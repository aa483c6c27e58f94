"""What every example's ``python -m examples.<name>`` runner shares, so each states only its own.

Two shapes: an app example (birthday greeter, follow-up tasks) seeds its database, shows what it
scheduled, then either fires what is due once (``--once``, as ``duetime tick`` would from cron)
or runs a worker; a service example (service-call timer, delayed notifications) runs a
broker-fed service until Ctrl-C, or with ``--demo`` publishes samples and exits when they are
done. Logging goes to stderr so a demo's stdout holds only what it shows.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol, TypeVar

import duetime

DEMO_TIMEOUT = 30.0
"""Seconds a ``--demo`` may take before the service is stopped anyway (a broker gone quiet)."""


def in_seconds(seconds: float) -> str:
    """An ISO 8601 instant ``seconds`` from now (negative: ago), in UTC with a 'Z'."""
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def _log_to_stderr() -> None:
    logging.basicConfig(
        level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )


def _nothing() -> None:
    return None


# -- app examples ------------------------------------------------------------------------------
def run_app(
    app: duetime.App,
    *,
    prog: str,
    banner: str,
    fired: str,
    seed: Callable[[], None],
    after_tick: Callable[[], None] = _nothing,
    report: Callable[[], None] = _nothing,
) -> None:
    """Seed ``app``, then fire what is due once (``--once``) or run its worker until Ctrl-C.

    ``seed`` schedules and shows the example's timers; with ``--once`` the due ones fire
    (counted as "fired N due <fired>") and ``after_tick`` runs; ``report`` runs last either
    way, before the worker starts.
    """
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument(
        "--once", action="store_true", help="fire what is due now, then exit (no worker)"
    )
    args = parser.parse_args()
    _log_to_stderr()
    print(banner)
    with app:
        seed()
        if args.once:
            stats = app.tick()
            print(f"\nfired {stats.total()} due {fired}: {dict(stats.outcomes)}")
            after_tick()
        report()
        if args.once:
            return
    print("\nworker running; Ctrl-C to stop")
    app.run_worker()


# -- service examples --------------------------------------------------------------------------
class Service(Protocol):
    """A long-running example service: it works until ``stop`` is set."""

    async def run(self, stop: asyncio.Event) -> None: ...


S = TypeVar("S", bound=Service)


def run_service(
    parser: argparse.ArgumentParser,
    build: Callable[[argparse.Namespace], S],
    describe: Callable[[S], str],
    demo: Callable[[S], Awaitable[None]],
    *,
    demo_help: str,
) -> None:
    """Parse the flags (``parser`` plus ``--demo``), then run the service until it is stopped.

    ``build`` makes the service from the flags and ``describe`` says where it listens; with
    ``--demo``, ``demo`` runs beside it (at most :data:`DEMO_TIMEOUT` seconds) and its end stops
    the service. SIGINT and SIGTERM stop it too, letting in-flight work finish.
    """
    parser.add_argument("--demo", action="store_true", help=demo_help)
    args = parser.parse_args()
    _log_to_stderr()
    asyncio.run(_serve(lambda: build(args), describe, demo if args.demo else None))


async def _serve(
    build: Callable[[], S],
    describe: Callable[[S], str],
    demo: Callable[[S], Awaitable[None]] | None,
) -> None:
    service = build()  # on the loop it will run on
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    print(describe(service), flush=True)
    tasks = [asyncio.create_task(service.run(stop))]
    if demo is not None:
        tasks.append(asyncio.create_task(_bounded(demo(service), stop)))
    else:
        print("running; Ctrl-C to stop", flush=True)
    try:
        await asyncio.gather(*tasks)
    finally:
        stop.set()


async def _bounded(demo: Awaitable[None], stop: asyncio.Event) -> None:
    """Run the demo within :data:`DEMO_TIMEOUT`, then stop the service whatever happened."""
    try:
        async with asyncio.timeout(DEMO_TIMEOUT):
            await demo
    finally:
        stop.set()
