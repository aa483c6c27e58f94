"""``python -m examples.event_bus COMMAND``: the bus from a shell, one step or node at a time.

``setup`` once, then a ``node ROLE`` per terminal, then ``emit``, ``dead``, ``tax-rate`` and
``replay``, ``cleanup``, ``report``. ``demo`` does all of it with the four nodes as child
processes and stops them at the end. See README.md next to this file.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import subprocess
import sys
import uuid
from collections.abc import Awaitable, Callable, Sequence
from decimal import Decimal, InvalidOperation
from pathlib import Path

import nats.errors
import psycopg

import duetime
from duetime.app.runner import run_process
from duetime.bus.routes import describe, subscriptions_of
from examples._demo import DEMO_TIMEOUT
from examples.event_bus import operate, shop
from examples.event_bus.app import (
    CLEANUP_SCHEDULE,
    DATABASE_URL,
    EXAMPLE_URL,
    HEARTBEAT,
    NAMESPACE,
    NATS_URL,
    PREFIX,
    ROLES,
    Config,
    create_node,
    create_producer,
    node_id,
)

ROOT = Path(__file__).resolve().parents[2]
NODES_WITHIN = 30.0
"""Seconds ``emit`` and ``demo`` wait for every node to be up and to see the others."""
SETTLE_WITHIN = DEMO_TIMEOUT
"""Seconds ``demo`` waits for what it emitted to be handled, delivered or dead."""
STOP_WITHIN = 30.0


# -- commands ------------------------------------------------------------------------------------
def run_node(config: Config, role: str) -> int:
    """Run one node until SIGINT/SIGTERM; in-flight handlers finish before it exits."""
    app = create_node(role, config)
    me = node_id(role)
    subscriptions = subscriptions_of(config.namespace, app.registry.types, app.routes)
    print(f"node {me} takes {describe(subscriptions)}", flush=True)
    stats = run_process(app, node_id=me)
    print(f"node {me} stopped: {dict(stats.outcomes)}", flush=True)
    return 0


async def cmd_setup(app: duetime.AsyncApp, config: Config) -> None:
    action, schedule = await operate.setup(app, config)
    print(f"tables orders, invoices, tax_rates ready; NATS stream {config.stream} ready")
    upcoming = await app.schedules.preview(schedule=CLEANUP_SCHEDULE, count=3)
    print(
        f"schedule {schedule.name} {action}: {schedule.cron!r} in {schedule.timezone}, next "
        + ", ".join(operate.describe_occurrence(at, schedule.timezone) for at in upcoming)
    )


async def cmd_emit(app: duetime.AsyncApp, run: str, *, wait: bool) -> list[operate.Emitted]:
    if wait:  # an event claimed before a subscriber is known is not routed to it
        await operate.wait_for_nodes(app, ROLES, within=NODES_WITHIN)
    emitted = await operate.emit_orders(app, run)
    for event in emitted:
        print(f"emitted {event.type:<17} {event.key} ({event.action})", flush=True)
    return emitted


async def cmd_dead(app: duetime.AsyncApp) -> list[duetime.Timer]:
    dead = await operate.dead_letters(app)
    print(f"dead letters ({len(dead)}):")
    for timer in dead:
        print(f"  {timer.key}  {timer.type}  after {timer.attempts} attempt(s): {timer.last_error}")
    return dead


async def cmd_tax_rate(config: Config, country: str, percent: Decimal) -> None:
    async with await shop.connect(config.database_url) as conn:
        await shop.set_tax_rate(conn, country, percent)
    print(f"tax rate {country} = {percent}%")


async def cmd_replay(app: duetime.AsyncApp, keys: Sequence[str]) -> list[duetime.Timer]:
    replayed = await operate.replay(app, keys)
    for timer in replayed:
        print(f"replayed {timer.key}: {timer.status.value}, due now")
    return replayed


async def cmd_cleanup(app: duetime.AsyncApp, run: str) -> operate.Emitted:
    event = await operate.emit_cleanup(app, run)
    print(f"emitted {event.type} {event.key} ({event.action})", flush=True)
    return event


async def cmd_report(app: duetime.AsyncApp, config: Config, run: str | None) -> None:
    for line in await operate.report(app, config, run):
        print(line)


# -- the demo ------------------------------------------------------------------------------------
async def demo(app: duetime.AsyncApp, config: Config, run: str) -> None:
    """Every step in turn, with the four nodes as child processes of this one."""
    print("== setup")
    await cmd_setup(app, config)
    print(f"== starting the nodes: {', '.join(ROLES)}", flush=True)
    nodes = [_spawn_node(config, role) for role in ROLES]
    try:
        print("== emitting (once every node is up and sees the others)", flush=True)
        emitted = await cmd_emit(app, run, wait=True)
        await operate.wait_settled(app, emitted, within=SETTLE_WITHIN)
        print("== settled", flush=True)
        dead = await cmd_dead(app)
        print("== the fix: Norway's VAT, then the dead letters go round again", flush=True)
        await cmd_tax_rate(config, "NO", Decimal(25))
        replayed = await cmd_replay(app, [timer.key for timer in dead])
        again = [operate.Emitted(t.type, t.key, "replayed") for t in replayed]
        print("== the daily cleanup, once by hand", flush=True)
        again.append(await cmd_cleanup(app, run))
        await operate.wait_settled(app, again, within=SETTLE_WITHIN)
        print("== report")
        await cmd_report(app, config, run)
    finally:
        print("== stopping the nodes", flush=True)
        codes = _stop_nodes(nodes)
    if any(codes):
        raise RuntimeError(f"a node exited with an error: exit codes {codes}")


def _spawn_node(config: Config, role: str) -> subprocess.Popen[bytes]:
    """``python -m examples.event_bus … node ROLE``, sharing this terminal's output."""
    return subprocess.Popen(
        [sys.executable, "-m", "examples.event_bus", *_config_args(config), "node", role],
        cwd=ROOT,
    )


def _stop_nodes(nodes: Sequence[subprocess.Popen[bytes]]) -> list[int]:
    """SIGTERM each node (they finish what is in flight), then wait; kill one that hangs."""
    for node in nodes:
        if node.poll() is None:
            node.send_signal(signal.SIGTERM)
    codes = []
    for node in nodes:
        try:
            codes.append(node.wait(STOP_WITHIN))
        except subprocess.TimeoutExpired:
            node.kill()
            codes.append(node.wait())
    return codes


# -- the command line ----------------------------------------------------------------------------
def _config_args(config: Config) -> list[str]:
    return [
        "--database-url",
        config.database_url,
        "--nats-url",
        config.nats_url,
        "--prefix",
        config.prefix,
        "--namespace",
        config.namespace,
        "--heartbeat",
        str(config.heartbeat),
    ]


def _percent(text: str) -> Decimal:
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= value < 100:
        raise argparse.ArgumentTypeError("a percentage from 0 to under 100")
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m examples.event_bus",
        description="An event bus on duetime: 'setup' once, a 'node ROLE' per terminal, "
        "then 'emit', 'dead', 'tax-rate', 'replay', 'cleanup', 'report' -- or all of it: 'demo'.",
    )
    p.add_argument(
        "--database-url",
        default=DATABASE_URL,
        help="PostgreSQL; ?schema=NAME keeps the bus in its own schema "
        "(default $DUETIME_DATABASE_URL; required, e.g. " + EXAMPLE_URL.replace("%", "%%") + ")",
    )
    p.add_argument("--nats-url", default=NATS_URL, help="default $NATS_URL or %(default)s")
    p.add_argument("--prefix", default=PREFIX, help="NATS subject prefix (%(default)s)")
    p.add_argument("--namespace", default=NAMESPACE, help="(default %(default)s)")
    p.add_argument("--heartbeat", type=float, default=HEARTBEAT, help="node heartbeat, seconds")
    commands = p.add_subparsers(dest="command", required=True)
    commands.add_parser("setup", help="tables, the daily cleanup schedule, the NATS stream")
    node = commands.add_parser("node", help="run one node until Ctrl-C")
    node.add_argument("role", choices=ROLES, help="which handlers and routes it runs")
    emit = commands.add_parser("emit", help="emit five orders and their payments")
    emit.add_argument("--run", default=None, help="order ids <run>-1…5 (default: random)")
    emit.add_argument("--no-wait", action="store_true", help="do not wait for the nodes")
    commands.add_parser("dead", help="list the dead-letter queue with the reasons")
    tax = commands.add_parser("tax-rate", help="set a country's VAT (the dead payment's fix)")
    tax.add_argument("country")
    tax.add_argument("percent", type=_percent)
    replay = commands.add_parser("replay", help="replay dead events (default: all of them)")
    replay.add_argument("keys", nargs="*")
    cleanup = commands.add_parser("cleanup", help="run the daily cleanup once now")
    cleanup.add_argument("--run", default=None, help="names its key (default: random)")
    report = commands.add_parser("report", help="read model, event log, NATS, next cleanup")
    report.add_argument("--run", default=None, help="only this run's orders and events")
    demo_cmd = commands.add_parser("demo", help="all of it, with the nodes as child processes")
    demo_cmd.add_argument("--run", default=None, help="order ids <run>-1…5 (default: random)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(  # stderr, so stdout holds only what the commands show
        level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    try:
        config = Config(
            args.database_url, args.nats_url, args.prefix, args.namespace, args.heartbeat
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.command == "node":
        return run_node(config, args.role)
    run: str = getattr(args, "run", None) or uuid.uuid4().hex[:6]
    steps: dict[str, Callable[[duetime.AsyncApp], Awaitable[object]]] = {
        "setup": lambda app: cmd_setup(app, config),
        "emit": lambda app: cmd_emit(app, run, wait=not args.no_wait),
        "dead": cmd_dead,
        "tax-rate": lambda app: cmd_tax_rate(config, args.country.upper(), args.percent),
        "replay": lambda app: cmd_replay(app, args.keys),
        "cleanup": lambda app: cmd_cleanup(app, run),
        "report": lambda app: cmd_report(app, config, args.run),
        "demo": lambda app: demo(app, config, run),
    }

    async def step() -> None:
        async with create_producer(config) as app:
            await steps[args.command](app)

    try:
        asyncio.run(step())
    except (
        TimeoutError,
        RuntimeError,
        OSError,
        duetime.DuetimeError,
        psycopg.Error,
        nats.errors.Error,
    ) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
