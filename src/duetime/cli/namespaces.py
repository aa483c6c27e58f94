"""``duetime namespaces create NAME`` and ``duetime namespaces ls``: the only CLI writes that
make a namespace, so a typo in ``--namespace`` is an error instead of a tenant no worker serves."""

from __future__ import annotations

import click

from duetime.app.facade import AsyncApp
from duetime.cli import output
from duetime.cli.context import common_options, config, run_app


@click.group()
def namespaces() -> None:
    """Create and list namespaces (tenants)."""


@namespaces.command("create")
@click.argument("name")
@common_options
def create(name: str) -> None:
    """Create namespace NAME (nothing changes if it exists)."""

    async def action(app: AsyncApp) -> bool:
        return await app.add_namespace(name)

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
@common_options
def list_namespaces() -> None:
    """List every namespace of the database."""

    async def action(app: AsyncApp) -> list[str]:
        return await app.namespaces()

    names = run_app(action)
    if config().json:
        output.emit_json({"namespaces": names})
        return
    console = output.stdout()
    for name in names:
        console.print(output.shown(name))
    if not names:
        console.print("no namespaces")
