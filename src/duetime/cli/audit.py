"""``duetime audit``: the namespace's audit log — who did what, when, to what — newest first."""

from __future__ import annotations

import click

from duetime.app.facade import AsyncApp
from duetime.cli import output
from duetime.cli.context import common_options, config, run_app
from duetime.model import Page
from duetime.model.audit import AuditEntry


@click.command()
@click.option("--limit", type=int, default=50, show_default=True)
@click.option("--cursor", help="Continue a listing (printed after the previous page).")
@common_options
def audit(limit: int, cursor: str | None) -> None:
    """Operator actions, newest first: cancels, replays, deletes, bulk actions, pauses, limits
    and tokens, each with its actor (token:NAME, cli:USER@HOST, ...), what it took and how many."""

    async def action(app: AsyncApp) -> Page[AuditEntry]:
        return await app.audit.log(cursor=cursor, limit=limit)

    page = run_app(action, create_namespace=False)
    if config().json:
        output.emit_json(
            {"items": [e.to_dict() for e in page.items], "next_cursor": page.next_cursor}
        )
        return
    console = output.stdout()
    if not page.items:
        console.print("no audited actions")
    else:
        console.print(output.audit_table(page.items))
    if page.next_cursor:
        console.print(f"more: pass --cursor {page.next_cursor}", style="dim")
