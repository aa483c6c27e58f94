"""``duetime limits`` and ``duetime pause``/``resume``: flow control across every node.

Limits and pauses are rows in the database, per namespace and event type or glob; every worker
reads them again within a second, so they change without a restart.
"""

from __future__ import annotations

from datetime import UTC, datetime

import click

from duetime.app.facade import AsyncApp
from duetime.cli import output
from duetime.cli.context import common_options, config, run_app
from duetime.model import Page
from duetime.model.flow_rules import FlowRule, FlowStatus


@click.group()
def limits() -> None:
    """Concurrency and rate limits per event type or glob, across every node."""


@limits.command("set")
@click.argument("pattern")
@click.option("--concurrency", type=int, metavar="N", help="At most N attempts running at once.")
@click.option("--rate", metavar="N/PERIOD", help="At most N starts per period: 100/s, 6000/min.")
@click.option(
    "--burst", type=int, metavar="N", help="Starts a rate allows at once (default: 50 ms' worth)."
)
@click.option(
    "--partition-by",
    metavar="FIELD",
    help="Apply the concurrency per 'subject' or per payload field ('payload.user_id').",
)
@common_options
def set_limit(
    pattern: str,
    concurrency: int | None,
    rate: str | None,
    burst: int | None,
    partition_by: str | None,
) -> None:
    """Limit the event types PATTERN matches (a type, or a glob such as 'email.*')."""

    async def action(app: AsyncApp) -> FlowRule:
        return await app.limits.set(
            pattern, concurrency=concurrency, rate=rate, burst=burst, partition_by=partition_by
        )

    rule = run_app(action, create_namespace=False)
    if config().json:
        output.emit_json({"action": "set", "limit": rule.to_dict()})
    else:
        output.stdout().print(f"limit on {rule.pattern}: {_describe(rule)}")


@limits.command("ls")
@click.option("--limit", type=int, default=100, show_default=True)
@click.option("--cursor", help="Continue a listing (printed after the previous page).")
@common_options
def list_limits(limit: int, cursor: str | None) -> None:
    """The namespace's limits and pauses by pattern, with what each holds back now."""

    async def action(app: AsyncApp) -> Page[FlowStatus]:
        return await app.limits.page(cursor=cursor, limit=limit)

    listed = run_app(action, create_namespace=False)
    found = listed.items
    now = datetime.now(UTC)
    if config().json:
        items = [status.to_dict(now) for status in found]
        output.emit_json({"items": items, "next_cursor": listed.next_cursor})
        return
    if not found:
        output.stdout().print("no limits or pauses")
        return
    table = output.new_table()
    for column in ("pattern", "limit", "paused", "running", "held", "oldest held"):
        table.add_column(column, overflow="fold")
    for status in found:
        row = status.to_dict(now)
        age = row["oldest_held_seconds"]
        output.add_row(
            table,
            _subject(status.rule),
            _describe(status.rule) if status.rule.limits else "-",
            "paused" if status.rule.paused else "",
            str(status.running),
            str(status.held),
            "" if age is None else f"{age:.1f}s ago",
        )
    output.stdout().print(table)
    if listed.next_cursor:
        output.stdout().print(f"more: pass --cursor {listed.next_cursor}", style="dim")


@limits.command("rm")
@click.argument("pattern")
@common_options
def remove_limit(pattern: str) -> None:
    """Remove PATTERN's limit (a pause stays)."""

    async def action(app: AsyncApp) -> None:
        await app.limits.remove(pattern)

    run_app(action, create_namespace=False)
    if config().json:
        output.emit_json({"action": "removed", "pattern": pattern})
    else:
        output.stdout().print(f"removed the limit on {pattern}")


@click.command()
@click.argument("pattern")
@common_options
def pause(pattern: str) -> None:
    """Start none of the event types PATTERN matches, on any node, until 'duetime resume'."""

    async def action(app: AsyncApp) -> FlowRule:
        return await app.limits.pause(pattern)

    rule = run_app(action, create_namespace=False)
    if config().json:
        output.emit_json({"action": "paused", "limit": rule.to_dict()})
    else:
        output.stdout().print(f"paused {pattern}: its timers wait, in order, for resume")


@click.command()
@click.argument("pattern")
@common_options
def resume(pattern: str) -> None:
    """Let PATTERN's paused event types start again, oldest due first."""

    async def action(app: AsyncApp) -> None:
        await app.limits.resume(pattern)

    run_app(action, create_namespace=False)
    if config().json:
        output.emit_json({"action": "resumed", "pattern": pattern})
    else:
        output.stdout().print(f"resumed {pattern}")


def _subject(rule: FlowRule) -> str:
    """What a rule governs: its pattern's types, or a destination's deliveries."""
    return rule.pattern if rule.destination is None else f"destination {rule.destination}"


def _describe(rule: FlowRule) -> str:
    parts: list[str] = []
    if rule.concurrency is not None:
        per = f" per {rule.partition_by}" if rule.partition_by else ""
        parts.append(f"concurrency {rule.concurrency}{per}")
    if rule.rate is not None:
        parts.append(f"rate {rule.rate} (burst {rule.effective_burst})")
    return ", ".join(parts)
