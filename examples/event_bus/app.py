"""The nodes of the bus: what each one subscribes to, on one PostgreSQL database and namespace.

Each role is its own process, with its own handlers (heterogeneous nodes). A node claims only the
events it subscribes to, so no node ever sees, let alone dead-letters, another node's events:

========== ======================================================================================
orders      ``order.placed`` → the ``orders`` read model; transactional (exactly-once effects)
billing     ``payment.captured`` → an invoice; transactional; no tax rate → dead (replay later)
gateway     route ``order.*`` → NATS JetStream subject ``<prefix>.<type>``
maintenance ``maintenance.cleanup`` → purge old orders (the daily cleanup schedule's event)
========== ======================================================================================

``order.placed`` is wanted by two nodes (the orders handler and the gateway's route), so it fans
out into one delivery per destination, each retried and dead-lettered on its own.

The database comes from ``DUETIME_DATABASE_URL`` (or ``--database-url``): there is no default,
so the example never writes into a database you did not name. NATS comes from ``NATS_URL``
(default ``nats://127.0.0.1:4222``).
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

import duetime
from duetime.destinations.nats import NatsDestination
from examples.event_bus import shop

DATABASE_URL = os.environ.get("DUETIME_DATABASE_URL", "")
"""Empty when not set: :class:`Config` then asks for one."""
EXAMPLE_URL = "postgresql://postgres@127.0.0.1:5432/event_bus?schema=event_bus"
"""What the README suggests: a database of the example's own (``createdb event_bus``)."""
NATS_URL = os.environ.get("NATS_URL") or "nats://127.0.0.1:4222"
NAMESPACE = "shop"
PREFIX = "shop.events"
HEARTBEAT = 1.0
"""Seconds between a node's heartbeats (duetime's default is 10). A node routes to the others'
subscriptions as of its last heartbeat, so a short one lets a node that has just started take
its share within a second; the price is one small UPDATE per node and heartbeat."""

ORDER_PLACED = "order.placed"
PAYMENT_CAPTURED = "payment.captured"
CLEANUP = "maintenance.cleanup"
CLEANUP_SCHEDULE = "daily-cleanup"
CLEANUP_CRON = "0 2 * * *"
CLEANUP_TIMEZONE = "Europe/London"
RETENTION_DAYS = 30
BUS = "bus"
"""The name of the NATS destination: the suffix of its deliveries' keys (``<key>@bus``)."""
PRODUCER = "storefront"
"""Who emits the sample events (the envelope's ``producer``)."""

ROLES = ("orders", "billing", "gateway", "maintenance")
SUBSCRIBERS = {
    ORDER_PLACED: ("orders", "gateway"),
    PAYMENT_CAPTURED: ("billing",),
    CLEANUP: ("maintenance",),
}
"""Which roles take each event type: what the end-to-end test checks the history against."""


@dataclass(frozen=True, slots=True)
class Config:
    """Where the bus lives: database, namespace, and the NATS subjects the gateway publishes."""

    database_url: str = DATABASE_URL
    nats_url: str = NATS_URL
    prefix: str = PREFIX
    namespace: str = NAMESPACE
    heartbeat: float = HEARTBEAT

    def __post_init__(self) -> None:
        if not self.database_url:
            raise ValueError(
                "give the bus a PostgreSQL database of its own with --database-url or "
                f"DUETIME_DATABASE_URL, e.g. `createdb event_bus`, then {EXAMPLE_URL}"
            )
        if not self.database_url.startswith(("postgresql://", "postgres://")):
            raise ValueError(
                "the event bus example runs on PostgreSQL (its handlers write in the bus's own "
                f"transaction): give a postgresql:// URL, not {self.database_url.split(':')[0]}:"
            )

    @property
    def subject(self) -> str:
        """The gateway's subject template: ``shop.events.order.placed`` for an order."""
        return f"{self.prefix}.{{type}}"

    @property
    def stream(self) -> str:
        """The JetStream stream that keeps what the gateway publishes."""
        return f"{re.sub(r'[^A-Za-z0-9]+', '_', self.prefix).upper()}"

    @property
    def stream_subjects(self) -> list[str]:
        return [f"{self.prefix}.>"]


def node_id(role: str) -> str:
    """``<role>-<host>-<pid>``: the history says which node did what at a glance."""
    return f"{role}-{socket.gethostname()}-{os.getpid()}"


def role_of(node: str) -> str:
    """The role of a node id made by :func:`node_id`."""
    return node.split("-", 1)[0]


def create_node(role: str, config: Config) -> duetime.AsyncApp:
    """The app of one node: the bus's database and namespace with ``role``'s handlers/routes."""
    if role not in _NODES:
        raise ValueError(f"unknown role {role!r}; one of {', '.join(ROLES)}")
    me = node_id(role)
    app = duetime.AsyncApp(
        config.database_url, config.namespace, heartbeat=config.heartbeat, producer=me
    )
    _NODES[role](app, me, config)
    return app


def create_producer(config: Config) -> duetime.AsyncApp:
    """An app that only emits and reads (no worker): the storefront, or an operator's shell."""
    return duetime.AsyncApp(config.database_url, config.namespace, producer=PRODUCER)


# -- the nodes -----------------------------------------------------------------------------------
def _orders(app: duetime.AsyncApp, me: str, config: Config) -> None:
    @app.handler(ORDER_PLACED, transactional=True)
    async def record_order(event: duetime.Event, conn: shop.Connection) -> None:
        """The order row commits with the delivery's completion: one row per event, ever."""
        order = shop.Order.from_payload(event.payload)
        await shop.record_order(conn, order, event.key, event.emitted_at or event.due_at, me)
        print(f"[{me}] recording order {order.order_id} ({order.country})", flush=True)


def _billing(app: duetime.AsyncApp, me: str, config: Config) -> None:
    @app.handler(PAYMENT_CAPTURED, transactional=True)
    async def invoice(event: duetime.Event, conn: shop.Connection) -> duetime.Dead | None:
        """Invoice with the country's VAT; without a rate no retry can help: dead, with why."""
        payment = shop.Payment.from_payload(event.payload)
        tax = await shop.issue_invoice(conn, payment, event.key, me)
        if tax is None:
            return duetime.Dead(
                f"no tax rate for country {payment.country!r}: add it "
                f"(tax-rate {payment.country} PERCENT), then replay {event.key}"
            )
        print(f"[{me}] invoicing order {payment.order_id}: tax {tax / 100:.2f}", flush=True)
        return None


def _gateway(app: duetime.AsyncApp, me: str, config: Config) -> None:
    # Every order event goes to NATS too; JetStream's ack counts as delivered, and the stable
    # Nats-Msg-Id (<namespace>:<key>:bus) lets JetStream drop a redelivered duplicate.
    app.route("order.*", to=NatsDestination(BUS, config.nats_url, config.subject))


def _maintenance(app: duetime.AsyncApp, me: str, config: Config) -> None:
    @app.handler(CLEANUP, transactional=True)
    async def cleanup(event: duetime.Event, conn: shop.Connection) -> None:
        """The daily cleanup: the read model keeps ``retention_days`` of orders."""
        payload = event.payload if isinstance(event.payload, dict) else {}
        days = int(payload.get("retention_days", RETENTION_DAYS))
        purged = await shop.purge_orders(conn, timedelta(days=days))
        print(f"[{me}] cleanup: purging {purged} orders older than {days} days", flush=True)


_NODES: dict[str, Callable[[duetime.AsyncApp, str, Config], None]] = {
    "orders": _orders,
    "billing": _billing,
    "gateway": _gateway,
    "maintenance": _maintenance,
}
