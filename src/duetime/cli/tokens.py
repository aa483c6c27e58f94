"""``duetime tokens``: create, list and revoke the REST API's bearer tokens.

A token is printed once, when it is created; only its SHA-256 hash is stored. Creating a token
also creates its namespaces, since with auth on the API never creates namespaces by itself.
"""

from __future__ import annotations

import click

from duetime.app.facade import AsyncApp
from duetime.cli import output
from duetime.cli.context import config, database_url_option, json_option, run_app
from duetime.model import Page
from duetime.tenancy.auth import ALL_NAMESPACES, IssuedToken, TokenInfo, check_token_namespaces


@click.group()
def tokens() -> None:
    """Bearer tokens for the REST API, each scoped to namespaces, read-only or read-write."""


@tokens.command()
@click.option(
    "--namespace",
    "namespaces",
    multiple=True,
    metavar="NAME",
    help="A namespace the token may use; repeat for more, or '*' for every namespace.",
)
@click.option("--all-namespaces", is_flag=True, help="Same as --namespace '*'.")
@click.option("--read-only", is_flag=True, help="May read, never change.")
@click.option("--name", metavar="TEXT", help="A label for 'tokens ls', e.g. who holds it.")
@database_url_option()
@json_option
def create(
    namespaces: tuple[str, ...], all_namespaces: bool, read_only: bool, name: str | None
) -> None:
    """Create a token and print it (the only time it is shown)."""
    scope = check_token_namespaces((*namespaces, ALL_NAMESPACES) if all_namespaces else namespaces)

    async def action(app: AsyncApp) -> IssuedToken:
        return await app.tokens.issue(scope, read_only=read_only, name=name)

    issued = run_app(action)
    if config().json:
        output.emit_json({"token": issued.secret, **issued.info.to_dict()})
        return
    console = output.stdout()
    console.print(issued.secret, soft_wrap=True)
    err = output.stderr()
    access = "read-only" if issued.info.read_only else "read-write"
    err.print(
        f"token {issued.info.id} ({access}, namespaces {', '.join(issued.info.namespaces)}). "
        "Store it now: it is not shown again. Send it as 'Authorization: Bearer <token>'.",
        soft_wrap=True,
    )


@tokens.command("ls")
@click.option("--all", "include_revoked", is_flag=True, help="Include revoked tokens.")
@click.option("--limit", type=int, default=100, show_default=True)
@click.option("--cursor", help="Continue a listing (printed after the previous page).")
@database_url_option()
@json_option
def list_tokens(include_revoked: bool, limit: int, cursor: str | None) -> None:
    """List tokens (never the secrets), oldest first, a page at a time."""

    async def action(app: AsyncApp) -> Page[TokenInfo]:
        return await app.tokens.page(include_revoked=include_revoked, cursor=cursor, limit=limit)

    listed = run_app(action)
    found = listed.items
    if config().json:
        items = [info.to_dict() for info in found]
        output.emit_json({"items": items, "next_cursor": listed.next_cursor})
        return
    if not found:
        output.stdout().print("no tokens")
        return
    table = output.new_table()
    for column in ("id", "name", "namespaces", "access", "created", "last used", "state"):
        table.add_column(column, overflow="fold")
    for info in found:
        output.add_row(
            table,
            str(info.id),
            output.text(info.name),
            ", ".join(info.namespaces),
            "read-only" if info.read_only else "read-write",
            output.when(info.created_at),
            output.when(info.last_used_at),
            "active" if info.active else f"revoked {output.when(info.revoked_at)}",
        )
    output.stdout().print(table)
    if listed.next_cursor:
        output.stdout().print(f"more: pass --cursor {listed.next_cursor}", style="dim")


@tokens.command()
@click.argument("token_id", metavar="ID", type=int)
@database_url_option()
@json_option
def revoke(token_id: int) -> None:
    """Revoke token ID at once (requests with it get 401 from then on).

    Revoking the last token does not open the API: a server that turns auth on by tokens
    keeps asking for one until a new token is created, or until it is served with --no-auth.
    """

    async def action(app: AsyncApp) -> tuple[TokenInfo, int]:
        info = await app.tokens.revoke(token_id)
        return info, len(await app.tokens.list())

    info, active = run_app(action)
    if config().json:
        output.emit_json({"action": "revoked", **info.to_dict(), "active_tokens": active})
        return
    output.stdout().print(f"revoked token {info.id}; {active} active token(s) left")
    if active == 0:
        output.stderr().print(
            "No active token is left, and the API stays protected: every request now gets "
            "401 until you create a token ('duetime tokens create --namespace NAME'). To open "
            "it to anyone who can reach it, serve with --no-auth (DUETIME_AUTH=false).",
            soft_wrap=True,
        )
