"""The shop's read model: the tables the transactional handlers write, next to duetime's own.

They live in the schema of the database URL (``?schema=…``). That schema is the ``search_path``
of the connection duetime hands a transactional handler, so the handlers name the tables
unqualified, and :func:`connect` opens the example's own connections the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import psycopg
from psycopg.rows import DictRow, dict_row

import duetime
import duetime.postgres

Connection = psycopg.AsyncConnection[Any]
"""A connection as a transactional handler receives it (psycopg, dict rows)."""

TABLES = (
    """
    CREATE TABLE IF NOT EXISTS orders (
        order_id    text PRIMARY KEY,
        event_key   text NOT NULL UNIQUE,
        customer    text NOT NULL,
        country     text NOT NULL,
        total_cents bigint NOT NULL,
        currency    text NOT NULL,
        placed_at   timestamptz NOT NULL,
        recorded_by text NOT NULL
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS tax_rates (
        country text PRIMARY KEY,
        percent numeric(5, 2) NOT NULL CHECK (percent >= 0 AND percent < 100)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS invoices (
        order_id     text PRIMARY KEY,
        event_key    text NOT NULL UNIQUE,
        country      text NOT NULL,
        amount_cents bigint NOT NULL,
        tax_cents    bigint NOT NULL,
        issued_at    timestamptz NOT NULL DEFAULT now(),
        issued_by    text NOT NULL
    )
    """,
)

TAX_RATES = {"GB": Decimal(20), "DE": Decimal(19), "FR": Decimal(20), "NL": Decimal(21)}
"""VAT the shop knows at first; Norway is missing on purpose, so its payment is dead-lettered."""


@dataclass(frozen=True, slots=True)
class Order:
    """What ``order.placed`` carries."""

    order_id: str
    customer: str
    country: str
    total_cents: int
    currency: str

    def payload(self) -> dict[str, Any]:
        return {
            "order_id": self.order_id,
            "customer": self.customer,
            "country": self.country,
            "total_cents": self.total_cents,
            "currency": self.currency,
        }

    @classmethod
    def from_payload(cls, payload: Any) -> Order:
        """Read the payload; a malformed one is :class:`duetime.Dead`: no retry can fix it."""
        try:
            return cls(
                str(payload["order_id"]),
                str(payload["customer"]),
                str(payload["country"]),
                int(payload["total_cents"]),
                str(payload["currency"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise duetime.Dead(f"malformed order.placed payload: {exc!r}") from exc


@dataclass(frozen=True, slots=True)
class Payment:
    """What ``payment.captured`` carries."""

    order_id: str
    amount_cents: int
    country: str

    def payload(self) -> dict[str, Any]:
        return {
            "order_id": self.order_id,
            "amount_cents": self.amount_cents,
            "country": self.country,
        }

    @classmethod
    def from_payload(cls, payload: Any) -> Payment:
        """Read the payload; a malformed one is :class:`duetime.Dead`: no retry can fix it."""
        try:
            return cls(
                str(payload["order_id"]), int(payload["amount_cents"]), str(payload["country"])
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise duetime.Dead(f"malformed payment.captured payload: {exc!r}") from exc


SAMPLE = (
    ("ada", "GB", 4200, "GBP"),
    ("jonas", "DE", 1999, "EUR"),
    ("camille", "FR", 5600, "EUR"),
    ("noor", "NL", 1250, "EUR"),
    ("ingrid", "NO", 8900, "NOK"),
)


def sample_orders(run: str) -> list[Order]:
    """Five orders of one demo run, ids ``<run>-1`` … ``<run>-5``; the last one is Norwegian."""
    return [
        Order(f"{run}-{n}", customer, country, total, currency)
        for n, (customer, country, total, currency) in enumerate(SAMPLE, start=1)
    ]


# -- connections and setup -----------------------------------------------------------------------
async def connect(database_url: str) -> psycopg.AsyncConnection[DictRow]:
    """A connection of our own on the schema of ``database_url`` (as duetime's connections are)."""
    return await psycopg.AsyncConnection.connect(
        duetime.postgres.conninfo(database_url), autocommit=True, row_factory=dict_row
    )


async def create_tables(conn: Connection) -> None:
    """Create the read model's tables (idempotent) and the tax rates the shop starts with."""
    async with conn.transaction():
        for statement in TABLES:
            await conn.execute(statement)
        for country, percent in TAX_RATES.items():
            await conn.execute(
                "INSERT INTO tax_rates (country, percent) VALUES (%s, %s) "
                "ON CONFLICT (country) DO NOTHING",
                (country, percent),
            )


async def set_tax_rate(conn: Connection, country: str, percent: Decimal) -> None:
    await conn.execute(
        "INSERT INTO tax_rates (country, percent) VALUES (%s, %s) "
        "ON CONFLICT (country) DO UPDATE SET percent = EXCLUDED.percent",
        (country, percent),
    )


# -- the handlers' effects (run inside the transaction that completes the event) ---------------
async def record_order(
    conn: Connection, order: Order, event_key: str, placed_at: datetime, node: str
) -> None:
    """Insert the order. No ``ON CONFLICT``: a second effect of one event would fail loudly."""
    await conn.execute(
        "INSERT INTO orders (order_id, event_key, customer, country, total_cents, currency,"
        " placed_at, recorded_by) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
        (
            order.order_id,
            event_key,
            order.customer,
            order.country,
            order.total_cents,
            order.currency,
            placed_at,
            node,
        ),
    )


async def issue_invoice(
    conn: Connection, payment: Payment, event_key: str, node: str
) -> int | None:
    """Invoice the payment with its country's VAT (included in the price); the tax in cents,
    or None — nothing written — when the shop has no tax rate for the country."""
    cursor = await conn.execute(
        "INSERT INTO invoices (order_id, event_key, country, amount_cents, tax_cents, issued_by)"
        " SELECT %(order_id)s, %(key)s, country, %(amount)s,"
        "        round(%(amount)s * percent / (100 + percent)), %(node)s"
        " FROM tax_rates WHERE country = %(country)s"
        " RETURNING tax_cents",
        {
            "order_id": payment.order_id,
            "key": event_key,
            "amount": payment.amount_cents,
            "node": node,
            "country": payment.country,
        },
    )
    row: Mapping[str, Any] | None = await cursor.fetchone()
    return None if row is None else int(row["tax_cents"])


async def purge_orders(conn: Connection, older_than: timedelta) -> int:
    """Delete orders placed more than ``older_than`` ago: the read model keeps recent ones."""
    cursor = await conn.execute(
        "DELETE FROM orders WHERE placed_at < now() - %s::interval", (older_than,)
    )
    return cursor.rowcount


# -- reading -------------------------------------------------------------------------------------
async def orders(conn: Connection) -> list[dict[str, Any]]:
    cursor = await conn.execute("SELECT * FROM orders ORDER BY order_id")
    return [dict(row) for row in await cursor.fetchall()]


async def invoices(conn: Connection) -> list[dict[str, Any]]:
    cursor = await conn.execute("SELECT * FROM invoices ORDER BY order_id")
    return [dict(row) for row in await cursor.fetchall()]
