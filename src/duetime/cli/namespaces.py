"""``duetime namespaces create NAME`` and ``duetime namespaces ls``: the only CLI writes that
make a namespace, so a typo in ``--namespace`` is an error instead of a tenant no worker serves."""

from __future__ import annotations

import click

from duetime.app.facade import AsyncApp
from duetime.cli import output
from duetime.cli.context import common_options, config, run_app
from duetime.model import Page


@click.group()
def namespaces() -> None:
    """Create and list namespaces (tenants)."""


@namespaces.command("create")
@click.argument("name")
@common_options
def create(name: str) -> None:
    """Create namespace NAME (nothing changes if it exists)."""

    async def action(app: AsyncApp) -> bool:
        return await app.namespaces.add(name)

    created = run_app(action)
    if config().json:
        output.emit_json({"name": name, "created": created})
        return
    output.stdout().print(
        f"created namespace {output.shown(name)}"
        if created
        else f"namespace {output.shown(name)} exists already"
    )


@namespaces.command("ls")
@click.option("--limit", type=int, default=100, show_default=True)
@click.option("--cursor", help="Continue a listing (printed after the previous page).")
@common_options
def list_namespaces(limit: int, cursor: str | None) -> None:
    """List the namespaces of the database by name, a page at a time."""

    async def action(app: AsyncApp) -> Page[str]:
        return await app.namespaces.page(cursor=cursor, limit=limit)

    listed = run_app(action)
    names = listed.items
    if config().json:
        output.emit_json({"namespaces": names, "next_cursor": listed.next_cursor})
        return
    console = output.stdout()
    for name in names:
        console.print(output.shown(name))
    if not names:
        console.print("no namespaces")
    if listed.next_cursor:
        console.print(f"more: pass --cursor {listed.next_cursor}", style="dim")
