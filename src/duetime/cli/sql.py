"""``duetime sql``: who may call duetime's SQL functions (``schedule(...)``, ``emit(...)``…)
from their own database session — a trigger's owner, a service in another language."""

from __future__ import annotations

import click

from duetime.app.facade import AsyncApp
from duetime.cli import output
from duetime.cli.context import config, database_url_option, json_option, run_app


@click.group("sql")
def sql() -> None:
    """Let database roles schedule with duetime's SQL functions (PostgreSQL)."""


@sql.command("grant")
@click.argument("role")
@click.option(
    "--namespace",
    "namespaces",
    multiple=True,
    required=True,
    help="A namespace ROLE may use (repeat for more); it must exist.",
)
@json_option
@database_url_option()
def grant(role: str, namespaces: tuple[str, ...]) -> None:
    """Let database ROLE call the SQL functions in each --namespace, and nowhere else.

    ROLE gets USAGE on duetime's schema and EXECUTE on its functions, never a right on a table:
    it cannot read or change duetime's rows but through the functions."""

    async def action(app: AsyncApp) -> list[str]:
        return await app.grant_sql(role, namespaces)

    functions = run_app(action)
    if config().json:
        output.emit_json({"role": role, "namespaces": list(namespaces), "functions": functions})
        return
    console = output.stdout()
    shown = ", ".join(output.shown(name) for name in namespaces)
    console.print(f"role {output.shown(role)} may now schedule from SQL in {shown}")
    for function in functions:
        console.print(f"  {output.shown(function)}", style="dim")


@sql.command("revoke")
@click.argument("role")
@click.option("--namespace", "namespaces", multiple=True, required=True)
@json_option
@database_url_option()
def revoke(role: str, namespaces: tuple[str, ...]) -> None:
    """Take each --namespace back from database ROLE (its EXECUTE rights stay, and it is
    refused in any namespace it no longer holds)."""

    async def action(app: AsyncApp) -> int:
        return await app.revoke_sql(role, namespaces)

    revoked = run_app(action)
    if config().json:
        output.emit_json({"role": role, "revoked": revoked})
        return
    output.stdout().print(f"revoked {revoked} namespace(s) from role {output.shown(role)}")


@sql.command("grants")
@json_option
@database_url_option()
def grants() -> None:
    """List each role and the namespaces it may use from SQL."""

    async def action(app: AsyncApp) -> list[tuple[str, str]]:
        return await app.sql_grants()

    rows = run_app(action)
    if config().json:
        output.emit_json({"grants": [{"role": r, "namespace": n} for r, n in rows]})
        return
    console = output.stdout()
    for role, namespace in rows:
        console.print(f"{output.shown(role)}\t{output.shown(namespace)}")
    if not rows:
        console.print("no grants")
