"""Operator commands: ``migrate``, ``nodes`` and ``prune``."""

from __future__ import annotations

from typing import Any

import click

from duetime.app.facade import AsyncApp
from duetime.cli import output
from duetime.cli.context import common_options, config
from duetime.config import Settings
from duetime.support import eventloop


@click.command()
@common_options
def migrate() -> None:
    """Apply pending schema migrations and print the schema version."""
    applied, version = eventloop.run(_closing(config().app(), "migrate"))
    if config().json:
        output.emit_json({"applied": applied, "schema_version": version})
        return
    listed = ", ".join(map(str, applied)) if applied else "none (up to date)"
    output.stdout().print(f"schema version {version}; applied now: {listed}")


@click.command()
@common_options
def nodes() -> None:
    """Registered nodes: alive while their heartbeat is younger than the lease."""
    app = config().app()
    found = eventloop.run(_closing(app, "nodes"))
    now = app.clock.now()
    lease = app.settings.lease
    rows = [(node, now - node.heartbeat_at <= lease) for node in found]
    if config().json:
        output.emit_json({"items": [{**node.to_dict(), "alive": alive} for node, alive in rows]})
        return
    if not rows:
        output.stdout().print("no nodes registered")
        return
    output.stdout().print(output.nodes_table(rows))


@click.command()
@click.option("--retention", metavar="DURATION", help="Keep finished timers this long (P30D).")
@click.option(
    "--archive-after", metavar="DURATION", help="PostgreSQL: move them to history after (PT1H)."
)
@common_options
def prune(retention: str | None, archive_after: str | None) -> None:
    """Apply the retention once: archive and delete finished timers (workers do it every minute).

    Durations are ISO 8601 or seconds; they default to DUETIME_RETENTION (30 days) and
    DUETIME_ARCHIVE_AFTER (1 hour). Safe to run while workers run, and from cron.
    """
    cfg = config()
    settings = Settings.from_env(
        database_url=cfg.database_url,
        namespace=cfg.namespace,
        retention=retention,
        archive_after=archive_after,
    )
    report = eventloop.run(_closing(AsyncApp(settings=settings), "maintain"))
    if cfg.json:
        output.emit_json(report.to_dict())
        return
    console = output.stdout()
    console.print(f"archived {report.archived}, deleted {report.deleted}")
    if report.audit_deleted:
        console.print(f"audit log entries deleted: {report.audit_deleted}")
    for verb, names in (
        ("created", report.partitions_created),
        ("dropped", report.partitions_dropped),
    ):
        if names:
            console.print(f"history partitions {verb}: {', '.join(names)}")


async def _closing(app: AsyncApp, method: str) -> Any:
    """Run one facade call and close the app whatever happens."""
    try:
        return await getattr(app, method)()
    finally:
        await app.close()
