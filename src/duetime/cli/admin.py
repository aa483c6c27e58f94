"""Operator commands: ``migrate`` and ``nodes``."""

from __future__ import annotations

import asyncio
from typing import Any

import click

from duetime.app import AsyncApp
from duetime.cli import output
from duetime.cli.context import common_options, config


@click.command()
@common_options
def migrate() -> None:
    """Apply pending schema migrations and print the schema version."""
    applied, version = asyncio.run(_closing(config().app(), "migrate"))
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
    found = asyncio.run(_closing(app, "nodes"))
    now = app.clock.now()
    lease = app.settings.lease
    rows = [(node, now - node.heartbeat_at <= lease) for node in found]
    if config().json:
        output.emit_json({"nodes": [{**node.to_dict(), "alive": alive} for node, alive in rows]})
        return
    if not rows:
        output.stdout().print("no nodes registered")
        return
    output.stdout().print(output.nodes_table(rows))


async def _closing(app: AsyncApp, method: str) -> Any:
    """Run one facade call and close the app whatever happens."""
    try:
        return await getattr(app, method)()
    finally:
        await app.close()
