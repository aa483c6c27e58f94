"""What a producer and an operator do with the bus: set it up, emit, wait, replay, look.

Every wait here has a deadline and says what it was waiting for when it runs out, so a stalled
node shows up as an error naming it, never as a demo that hangs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

import nats

import duetime
from duetime.bus.routes import HANDLER, delivery_key
from duetime.model import Node, Outcome, Schedule, Timer
from duetime.sources.nats_source import ensure_stream
from examples.event_bus import shop
from examples.event_bus.app import (
    BUS,
    CLEANUP,
    CLEANUP_CRON,
    CLEANUP_SCHEDULE,
    CLEANUP_TIMEZONE,
    ORDER_PLACED,
    PAYMENT_CAPTURED,
    RETENTION_DAYS,
    Config,
    role_of,
)

POLL = 0.1
"""Seconds between two looks at the database while waiting."""


@dataclass(frozen=True, slots=True)
class Emitted:
    """One event the producer emitted, and whether emitting created it or found it there."""

    type: str
    key: str
    action: str

    def rows(self) -> list[str]:
        """The keys of the rows that must be final once it is handled: the event's own and,
        for a type that fans out, one delivery per destination."""
        if self.type == ORDER_PLACED:
            return [self.key, delivery_key(self.key, HANDLER), delivery_key(self.key, BUS)]
        return [self.key]


# -- setting up ----------------------------------------------------------------------------------
async def setup(app: duetime.AsyncApp, config: Config) -> tuple[str, Schedule]:
    """Migrate, create the read model, the daily cleanup schedule and the NATS stream.

    Idempotent: run it again and everything is kept as it is. The schedule is data in the
    database, not a process's configuration: every node's worker materialises its occurrences
    (one timer each, keyed by the occurrence), whichever nodes are up at 02:00.
    """
    await app.open()
    async with await shop.connect(config.database_url) as conn:
        await shop.create_tables(conn)
    action, schedule = await app.schedules.add(
        CLEANUP_SCHEDULE,
        CLEANUP,
        {"retention_days": RETENTION_DAYS},
        cron=CLEANUP_CRON,
        timezone=CLEANUP_TIMEZONE,
        subject="maintenance",
    )
    await ensure_nats_stream(config)
    return action, schedule


async def ensure_nats_stream(config: Config) -> None:
    """The stream that keeps what the gateway publishes (without one, JetStream would refuse
    the messages and the gateway's deliveries would retry until it exists)."""
    nc = await nats.connect(config.nats_url)
    try:
        await ensure_stream(nc.jetstream(), config.stream, config.stream_subjects)
    finally:
        await nc.close()


async def stream_messages(config: Config) -> int:
    """How many messages the gateway's stream holds (each one acknowledged by JetStream)."""
    nc = await nats.connect(config.nats_url)
    try:
        info = await nc.jetstream().stream_info(config.stream)
        return int(info.state.messages)
    finally:
        await nc.close()


def describe_occurrence(instant: datetime, timezone: str) -> str:
    """``2025-06-02 02:00 BST (01:00Z)``: the wall clock where it runs, and the UTC instant."""
    local = instant.astimezone(ZoneInfo(timezone))
    return f"{local:%Y-%m-%d %H:%M %Z} ({instant:%H:%MZ})"


# -- waiting -------------------------------------------------------------------------------------
async def wait_for_nodes(
    app: duetime.AsyncApp, roles: Sequence[str], *, within: float
) -> dict[str, Node]:
    """Wait until a live node of each role is registered and each has heartbeated twice since.

    A node reads the other nodes' subscriptions after each heartbeat, and routes what it claims
    by what it read last. After two heartbeats that began once all were registered, every node
    has read all the others: an ``order.placed`` emitted now fans out to both its subscribers,
    whichever node claims it.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    seen: dict[str, list[datetime]] = {}
    while True:
        live = _live_nodes(app, await app.nodes(), roles)
        missing = [role for role in roles if not any(role_of(n) == role for n in live)]
        if missing:
            seen = {}
        elif set(seen) != set(live):
            seen = {node_id: [node.heartbeat_at] for node_id, node in live.items()}
        else:
            for node_id, node in live.items():
                if node.heartbeat_at != seen[node_id][-1]:
                    seen[node_id].append(node.heartbeat_at)
            if all(len(beats) >= 3 for beats in seen.values()):
                return live
        if loop.time() > deadline:
            if missing:
                raise TimeoutError(
                    f"no live {', '.join(missing)} node within {within:g} s: start each with "
                    "'python -m examples.event_bus node ROLE'"
                )
            raise TimeoutError(f"the nodes did not heartbeat twice within {within:g} s")
        await asyncio.sleep(POLL)


def _live_nodes(
    app: duetime.AsyncApp, nodes: Iterable[Node], roles: Sequence[str]
) -> dict[str, Node]:
    now = app.clock.now()
    return {
        node.id: node
        for node in nodes
        if role_of(node.id) in roles
        and now - node.heartbeat_at <= app.settings.lease
        and any(s.namespace == app.namespace for s in node.subscriptions)
    }


async def wait_settled(
    app: duetime.AsyncApp, emitted: Iterable[Emitted], *, within: float
) -> dict[str, Timer]:
    """Wait until every row the events make is final (done, dead…); return them by key."""
    keys = [key for event in emitted for key in event.rows()]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    final: dict[str, Timer] = {}
    while True:
        for key in keys:
            if key in final:
                continue
            try:
                timer = await app.get(key)
            except duetime.NotFound:
                continue  # a delivery row appears when its event fans out
            if timer.status.is_final:
                final[key] = timer
        if len(final) == len(keys):
            return final
        if loop.time() > deadline:
            waiting = [key for key in keys if key not in final]
            raise TimeoutError(
                f"not settled within {within:g} s: {', '.join(waiting[:5])}"
                + (f" and {len(waiting) - 5} more" if len(waiting) > 5 else "")
                + " (is every node running?)"
            )
        await asyncio.sleep(POLL)


# -- emitting ------------------------------------------------------------------------------------
async def emit_orders(app: duetime.AsyncApp, run: str) -> list[Emitted]:
    """Emit the sample orders of ``run`` and a captured payment for each.

    Keys are the events' identities: emitting the same run again finds them there (``kept``)
    instead of placing the orders twice.
    """
    emitted = []
    for order in shop.sample_orders(run):
        placed = await app.emit(
            ORDER_PLACED,
            order.payload(),
            key=f"order:{order.order_id}:placed",
            subject=f"customer:{order.customer}",
            correlation_id=order.order_id,
        )
        payment = shop.Payment(order.order_id, order.total_cents, order.country)
        paid = await app.emit(
            PAYMENT_CAPTURED,
            payment.payload(),
            key=f"payment:{order.order_id}:captured",
            subject=f"customer:{order.customer}",
            correlation_id=order.order_id,
        )
        emitted.append(Emitted(ORDER_PLACED, placed.timer.key, placed.action))
        emitted.append(Emitted(PAYMENT_CAPTURED, paid.timer.key, paid.action))
    return emitted


async def emit_cleanup(app: duetime.AsyncApp, run: str) -> Emitted:
    """Run the daily cleanup once now, as the schedule does at 02:00 (same type and payload)."""
    result = await app.emit(
        CLEANUP, {"retention_days": RETENTION_DAYS}, key=f"cleanup:manual:{run}"
    )
    return Emitted(CLEANUP, result.timer.key, result.action)


# -- the dead-letter queue -----------------------------------------------------------------------
async def dead_letters(app: duetime.AsyncApp) -> list[Timer]:
    """Every dead event of the namespace (all pages)."""
    found: list[Timer] = []
    cursor: str | None = None
    while True:
        page = await app.timers.dead(cursor=cursor, limit=100)
        found.extend(page.items)
        cursor = page.next_cursor
        if cursor is None:
            return found


async def replay(app: duetime.AsyncApp, keys: Sequence[str]) -> list[Timer]:
    """Send dead events round again, due now: the given keys, or every dead one."""
    if not keys:
        keys = [timer.key for timer in await dead_letters(app)]
    return [await app.timers.replay(key) for key in keys]


# -- looking -------------------------------------------------------------------------------------
async def report(app: duetime.AsyncApp, config: Config, run: str | None) -> list[str]:
    """The read model, the invoices, the event log with every delivery, NATS, the schedule."""
    async with await shop.connect(config.database_url) as conn:
        orders = await shop.orders(conn)
        invoices = await shop.invoices(conn)
    if run is not None:
        orders = [o for o in orders if o["order_id"].startswith(f"{run}-")]
        invoices = [i for i in invoices if i["order_id"].startswith(f"{run}-")]
    lines = [f"orders read model ({len(orders)} rows):"]
    lines += [
        f"  {o['order_id']:<12} {o['customer']:<8} {o['country']}  "
        f"{o['total_cents'] / 100:>8.2f} {o['currency']}  recorded by {o['recorded_by']}"
        for o in orders
    ]
    lines.append(f"invoices ({len(invoices)} rows):")
    lines += [
        f"  {i['order_id']:<12} {i['country']}  {i['amount_cents'] / 100:>8.2f}  "
        f"tax {i['tax_cents'] / 100:>6.2f}  issued by {i['issued_by']}"
        for i in invoices
    ]
    lines.append("event log (each delivery: outcome by node):")
    lines += await _event_log(app, run)
    lines.append(
        f"NATS stream {config.stream}: {await stream_messages(config)} messages "
        f"on {config.prefix}.>"
    )
    schedule = await app.schedules.get(CLEANUP_SCHEDULE)
    if schedule.next_at is not None:
        lines.append(
            f"next {CLEANUP_SCHEDULE} ({schedule.cron!r} in {schedule.timezone}): "
            + describe_occurrence(schedule.next_at, schedule.timezone)
        )
    return lines


async def _event_log(app: duetime.AsyncApp, run: str | None) -> list[str]:
    lines = []
    cursor: str | None = None
    while True:
        # One run is minutes old: a day back finds it without walking the whole log.
        page = await app.events.log(since=None if run is None else "P1D", cursor=cursor, limit=100)
        for entry in page.items:
            timer = entry.timer
            if run is not None and f":{run}" not in timer.key:
                continue
            attempts = "; ".join(
                f"{a.outcome.value if a.outcome else 'running'} by {a.node_id}"
                + (f" ({a.error})" if a.error and a.outcome is not Outcome.DONE else "")
                for a in entry.deliveries
            )
            lines.append(f"  {timer.type:<19} {timer.key:<34} {attempts}")
        cursor = page.next_cursor
        if cursor is None or run is None:
            return sorted(lines, key=lambda line: line.split()[1])
