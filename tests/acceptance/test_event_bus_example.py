"""The event bus example, run as a user runs it: every command and node a subprocess.

Four node processes on the real PostgreSQL (a schema of the test's own, ``?schema=t_…``) and
real NATS JetStream (subjects and stream of the test's own). The checks read the database, the
history and the stream directly: each event handled once, by the node that subscribes to it;
the transactional handler's rows equal the events; the payment without a tax rate dead with its
reason, then replayed; the fan-out's deliveries in the history; the cleanup schedule's next
occurrence on London's wall clock. Every wait has a deadline and fails naming what stalled.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

if not os.environ.get("CI"):  # under CI a missing client library is an error, not a skip
    for client in ("nats", "psycopg"):
        pytest.importorskip(client, reason="needs duetime[brokers,postgres]")

import nats
import nats.js.errors

ROOT = Path(__file__).resolve().parents[2]
# The example lives at the repository root, the service probes beside the other test trees.
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(ROOT / "tests" / "store"))

from brokers import require_nats  # noqa: E402
from examples.event_bus import operate, shop  # noqa: E402
from examples.event_bus.app import (  # noqa: E402
    BUS,
    CLEANUP,
    ORDER_PLACED,
    PAYMENT_CAPTURED,
    ROLES,
    Config,
    create_producer,
)
from storekit import pooled_pg_url, require_pg  # noqa: E402

from duetime import AsyncApp, Outcome, Status, Timer  # noqa: E402
from duetime.model.history import LoggedEvent  # noqa: E402

pytestmark = pytest.mark.slow  # the example's processes end to end

WITHIN = 45.0
"""Seconds any one wait may take before the test fails (a stalled node, not a slow one)."""
LONDON = ZoneInfo("Europe/London")
HOST = socket.gethostname()


class Bus:
    """The example's command line and its node processes, on the test's own schema and subjects."""

    def __init__(self, config: Config, tmp_path: Path) -> None:
        self.config = config
        self.tmp_path = tmp_path
        self.nodes: dict[str, subprocess.Popen[bytes]] = {}

    def args(self) -> list[str]:
        c = self.config
        return [
            "--database-url",
            c.database_url,
            "--nats-url",
            c.nats_url,
            "--prefix",
            c.prefix,
            "--heartbeat",
            str(c.heartbeat),
        ]

    def run(self, *command: str, code: int = 0) -> str:
        """Run one command to its end; insist on its exit code and a clean stderr."""
        done = subprocess.run(
            [sys.executable, "-m", "examples.event_bus", *self.args(), *command],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == code, f"{command}: exit {done.returncode}\n{done.stderr}"
        assert "Traceback" not in done.stderr, done.stderr
        return done.stdout

    def start(self, role: str) -> None:
        out = (self.tmp_path / f"{role}.out").open("wb")
        self.nodes[role] = subprocess.Popen(
            [sys.executable, "-m", "examples.event_bus", *self.args(), "node", role],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        out.close()

    def node_id(self, role: str) -> str:
        """The id the node process of ``role`` works under (``<role>-<host>-<pid>``)."""
        return f"{role}-{HOST}-{self.nodes[role].pid}"

    def output(self, role: str) -> str:
        return (self.tmp_path / f"{role}.out").read_text(errors="replace")

    def logs(self) -> str:
        return "\n".join(f"--- {role} ---\n{self.output(role)[-3000:]}" for role in self.nodes)

    def stop(self) -> None:
        """SIGTERM every node: each finishes its work in flight and exits 0."""
        for proc in self.nodes.values():
            proc.send_signal(signal.SIGTERM)
        for role, proc in self.nodes.items():
            assert proc.wait(30) == 0, self.logs()
            assert "Traceback" not in self.output(role), self.output(role)
            assert f"node {self.node_id(role)} stopped" in self.output(role)

    def kill_leftovers(self) -> None:
        for proc in self.nodes.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@contextlib.contextmanager
def new_config() -> Iterator[Config]:
    """The demo's settings: a PostgreSQL schema and NATS subjects of its own, let go afterwards."""
    require_pg()
    nats_url = require_nats()
    with pooled_pg_url() as url:
        config = Config(url, nats_url, prefix=f"dtbus.{uuid.uuid4().hex[:10]}")
        try:
            yield config
        finally:
            asyncio.run(delete_stream(config))


async def delete_stream(config: Config) -> None:
    nc = await nats.connect(config.nats_url)
    try:
        with contextlib.suppress(nats.js.errors.NotFoundError):
            await nc.jetstream().delete_stream(config.stream)
    finally:
        await nc.close()


@pytest.fixture
def bus(tmp_path: Path) -> Iterator[Bus]:
    with new_config() as config:
        running = Bus(config, tmp_path)
        try:
            yield running
        finally:
            running.kill_leftovers()


def emitted_keys(stdout: str) -> dict[str, str]:
    """``{key: type}`` of the ``emitted TYPE KEY (action)`` lines of ``emit``."""
    found = {}
    for line in stdout.splitlines():
        if line.startswith("emitted "):
            _, type, key, _action = line.split()
            found[key] = type
    return found


def next_cleanup(after: datetime) -> datetime:
    """The first 02:00 on London's wall clock after ``after``, computed without duetime."""
    day: date = after.astimezone(LONDON).date()
    while True:
        candidate = datetime.combine(day, time(2, 0), tzinfo=LONDON).astimezone(UTC)
        if candidate > after:
            return candidate
        day += timedelta(days=1)


async def event_log(app: AsyncApp) -> dict[str, LoggedEvent]:
    """Every event and delivery that fired in the last hour, by key."""
    entries: dict[str, LoggedEvent] = {}
    cursor = None
    while True:
        page = await app.events.log(since="PT1H", cursor=cursor, limit=100)
        entries.update((entry.timer.key, entry) for entry in page.items)
        cursor = page.next_cursor
        if cursor is None:
            return entries


async def stream_messages(config: Config) -> list[Any]:
    nc = await nats.connect(config.nats_url)
    try:
        js = nc.jetstream()
        sub = await js.pull_subscribe(f"{config.prefix}.>", stream=config.stream)
        messages: list[Any] = []
        # The end of the stream: nats-py says so with its TimeoutError, or on some paths with
        # asyncio's (the builtin TimeoutError).
        with contextlib.suppress(nats.errors.TimeoutError, TimeoutError):
            while True:
                batch = await sub.fetch(100, timeout=1)
                messages.extend(batch)
        return messages
    finally:
        await nc.close()


# -- what the history, the read model and the stream must show ----------------------------------
async def settle(bus: Bus, app: AsyncApp, events: list[operate.Emitted]) -> dict[str, Timer]:
    """Wait for the rows these events make to be final; fail with the nodes' output if not."""
    try:
        return await operate.wait_settled(app, events, within=WITHIN)
    except TimeoutError as exc:
        pytest.fail(f"{exc}\n{bus.logs()}")


async def check_deliveries(
    bus: Bus, app: AsyncApp, final: dict[str, Timer], emitted: dict[str, str], dead_key: str
) -> None:
    """Each event was taken once, by the node that subscribes to it, and by no other."""
    log = await event_log(app)
    orders_node, gateway_node = bus.node_id("orders"), bus.node_id("gateway")
    billing_node = bus.node_id("billing")
    for key, type in emitted.items():
        attempts = [(a.node_id, a.outcome) for a in log[key].deliveries]
        if type == ORDER_PLACED:
            # Fanned out by whichever of its two subscribers claimed it, into one delivery per
            # destination, each taken once by the one node that serves it.
            ((fanned_by, outcome),) = attempts
            assert outcome is Outcome.FANNED_OUT
            assert fanned_by in (orders_node, gateway_node)
            assert final[key].status is Status.DONE
            for destination, node in (("handler", orders_node), (BUS, gateway_node)):
                delivery = log[f"{key}@{destination}"]
                assert delivery.timer.destination == destination
                assert delivery.timer.producer == "storefront"
                assert [(a.node_id, a.outcome) for a in delivery.deliveries] == [
                    (node, Outcome.DONE)
                ], (key, destination)
        elif key == dead_key:
            assert attempts == [(billing_node, Outcome.DEAD)]
            assert final[key].status is Status.DEAD
            assert (final[key].last_error or "").startswith("no tax rate for country 'NO'")
        else:
            assert attempts == [(billing_node, Outcome.DONE)], key
    # No node dead-lettered another's events: the one dead letter is billing's own.
    assert [t.key for t in await operate.dead_letters(app)] == [dead_key]


async def check_read_model(bus: Bus, emitted: dict[str, str], dead_key: str) -> None:
    """Exactly-once effects: one row per handled event, written by the node that handled it."""
    async with await shop.connect(bus.config.database_url) as conn:
        orders = await shop.orders(conn)
        invoices = await shop.invoices(conn)
    placed = sorted(k for k, t in emitted.items() if t == ORDER_PLACED)
    assert sorted(o["event_key"] for o in orders) == placed
    assert {o["recorded_by"] for o in orders} == {bus.node_id("orders")}
    paid = sorted(k for k, t in emitted.items() if t == PAYMENT_CAPTURED and k != dead_key)
    assert sorted(i["event_key"] for i in invoices) == paid  # the dead one wrote nothing
    assert {i["issued_by"] for i in invoices} == {bus.node_id("billing")}
    tax = {i["order_id"]: i["tax_cents"] for i in invoices}
    assert tax["t1-1"] == 700  # 42.00 GBP with 20 % VAT included


async def check_nats(config: Config, emitted: dict[str, str]) -> None:
    """Every order reached the stream once, with its stable id as ``Nats-Msg-Id``."""
    messages = await stream_messages(config)
    placed = {k for k, t in emitted.items() if t == ORDER_PLACED}
    assert sorted(json.loads(m.data)["key"] for m in messages) == sorted(placed)
    for msg in messages:
        envelope = json.loads(msg.data)
        assert msg.subject == f"{config.prefix}.order.placed"
        assert envelope["destination"] == BUS
        assert msg.headers["Nats-Msg-Id"] == f"shop:{envelope['key']}:{BUS}"
        assert envelope["message_id"] == msg.headers["Nats-Msg-Id"]
        assert envelope["producer"] == "storefront"
        assert envelope["redelivery"] == 0
        assert envelope["payload"]["order_id"] == envelope["key"].split(":")[1]


async def check_replayed(bus: Bus, app: AsyncApp, dead_key: str) -> None:
    """The dead payment went round again after the fix: done by billing, invoiced once."""
    replayed = [operate.Emitted(PAYMENT_CAPTURED, dead_key, "replayed")]
    (timer,) = (await settle(bus, app, replayed)).values()
    assert timer.status is Status.DONE
    billing = bus.node_id("billing")
    assert [(a.node_id, a.outcome) for a in await app.timers.attempts(dead_key)] == [
        (billing, Outcome.DEAD),
        (billing, Outcome.DONE),
    ]
    assert await operate.dead_letters(app) == []
    async with await shop.connect(bus.config.database_url) as conn:
        invoices = {i["order_id"]: i for i in await shop.invoices(conn)}
    assert invoices["t1-5"]["tax_cents"] == 1780  # 89.00 NOK with 25 % VAT included
    assert invoices["t1-5"]["event_key"] == dead_key


async def check_cleanup(bus: Bus, app: AsyncApp, key: str) -> None:
    """The cleanup ran once, on the maintenance node, and purged only what is past retention."""
    await settle(bus, app, [operate.Emitted(CLEANUP, key, "created")])
    assert [(a.node_id, a.outcome) for a in await app.timers.attempts(key)] == [
        (bus.node_id("maintenance"), Outcome.DONE)
    ]
    async with await shop.connect(bus.config.database_url) as conn:
        ids = sorted(o["order_id"] for o in await shop.orders(conn))
    assert ids == [f"t1-{n}" for n in range(1, 6)]  # old-1 purged, the recent ones kept


async def check_schedule(app: AsyncApp) -> None:
    """02:00 on London's wall clock: 01:00Z in summer, 02:00Z in winter."""
    schedule = await app.schedules.get("daily-cleanup")
    assert (schedule.cron, schedule.timezone) == ("0 2 * * *", "Europe/London")
    assert schedule.payload == {"retention_days": 30}
    assert schedule.next_at is not None
    assert schedule.next_at == next_cleanup(schedule.after_at)
    local = schedule.next_at.astimezone(LONDON)
    assert (local.hour, local.minute) == (2, 0)
    upcoming = await app.schedules.preview(schedule="daily-cleanup", count=3)
    assert upcoming[0] == schedule.next_at
    assert upcoming[1:] == [next_cleanup(upcoming[0]), next_cleanup(upcoming[1])]


# -- the example, one command at a time ----------------------------------------------------------
def test_nodes_take_only_their_events_once_with_fan_out_dead_letter_and_replay(bus: Bus) -> None:
    config = bus.config
    out = bus.run("setup")
    assert "schedule daily-cleanup created: '0 2 * * *' in Europe/London" in out
    assert "schedule daily-cleanup kept" in bus.run("setup")  # idempotent

    for role in ROLES:
        bus.start(role)
    emitted = emitted_keys(bus.run("emit", "--run", "t1"))  # waits for the nodes to see each other
    assert sorted(emitted.values()) == [ORDER_PLACED] * 5 + [PAYMENT_CAPTURED] * 5
    dead_key = "payment:t1-5:captured"  # the Norwegian one: the shop has no tax rate for NO

    async def first_round() -> None:
        async with create_producer(config) as app:
            events = [operate.Emitted(type, key, "created") for key, type in emitted.items()]
            final = await settle(bus, app, events)
            await check_deliveries(bus, app, final, emitted, dead_key)
            await check_read_model(bus, emitted, dead_key)
            await check_nats(config, emitted)

    asyncio.run(first_round())

    # Emitting the same run again finds every event there: nothing is placed twice.
    again = bus.run("emit", "--run", "t1", "--no-wait")
    assert again.count("(kept)") == 10
    assert "(created)" not in again

    # The operator reads the reason, fixes the cause, replays the dead letter.
    assert "no tax rate for country 'NO'" in bus.run("dead")
    bus.run("tax-rate", "NO", "25")
    assert f"replayed {dead_key}: scheduled" in bus.run("replay")
    asyncio.run(with_app(config, lambda app: check_replayed(bus, app, dead_key)))

    # The daily cleanup, once by hand, after an order from 40 days ago was imported.
    asyncio.run(import_old_order(config))
    cleanup = emitted_keys(bus.run("cleanup", "--run", "t1"))
    assert list(cleanup.values()) == [CLEANUP]
    asyncio.run(with_app(config, lambda app: check_cleanup(bus, app, next(iter(cleanup)))))
    asyncio.run(with_app(config, check_schedule))

    report = bus.run("report", "--run", "t1")
    assert "orders read model (5 rows):" in report
    assert "invoices (5 rows):" in report
    assert f"NATS stream {config.stream}: 5 messages" in report
    assert "fanned out to 2 deliveries: handler, bus" in report
    bus.stop()


async def with_app(config: Config, check: Callable[[AsyncApp], Awaitable[None]]) -> None:
    async with create_producer(config) as app:
        await check(app)


async def import_old_order(config: Config) -> None:
    async with await shop.connect(config.database_url) as conn:
        await conn.execute(
            "INSERT INTO orders VALUES ('old-1', 'imported:old-1', 'eve', 'GB', 100, 'GBP',"
            " now() - interval '40 days', 'import')"
        )


# -- the demo, as one program --------------------------------------------------------------------
def test_demo_runs_as_a_program() -> None:
    with new_config() as config:
        args = [
            *("--database-url", config.database_url),
            *("--nats-url", config.nats_url),
            *("--prefix", config.prefix),
        ]
        done = subprocess.run(
            [sys.executable, "-m", "examples.event_bus", *args, "demo", "--run", "d1"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=180,
        )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr
    out = done.stdout
    assert "dead letters (1):" in out
    assert "payment:d1-5:captured  payment.captured  after 1 attempt(s): no tax rate" in out
    assert "replayed payment:d1-5:captured: scheduled" in out
    assert "orders read model (5 rows):" in out
    assert "invoices (5 rows):" in out
    assert f"NATS stream {config.stream}: 5 messages" in out
    assert out.count(" stopped: ") == len(ROLES)


def test_refuses_a_database_that_is_not_postgresql(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'bus.db'}"
    done = subprocess.run(
        [sys.executable, "-m", "examples.event_bus", "--database-url", url, "setup"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "runs on PostgreSQL" in done.stderr
    assert not (tmp_path / "bus.db").exists()


def test_asks_for_a_database_rather_than_using_a_shared_one() -> None:
    env = {k: v for k, v in os.environ.items() if k != "DUETIME_DATABASE_URL"}
    done = subprocess.run(
        [sys.executable, "-m", "examples.event_bus", "setup"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "--database-url or DUETIME_DATABASE_URL" in done.stderr
    assert "createdb event_bus" in done.stderr
