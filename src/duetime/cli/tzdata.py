"""``duetime tzdata diff``: what a newer zoneinfo would move, before it is installed."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from duetime.cli import output
from duetime.cli.context import common_options, config, run_app

if TYPE_CHECKING:
    from duetime.app.facade import AsyncApp
    from duetime.services.tzdata_diff import ZoneMove


@click.group("tzdata")
def tzdata() -> None:
    """The tz database: preview what new zone rules would move."""


@tzdata.command("diff")
@click.option(
    "--zoneinfo",
    "folder",
    required=True,
    metavar="DIR",
    help="A compiled zoneinfo tree, e.g. a newer tzdata package's zoneinfo folder.",
)
@click.option("--count", type=int, default=5, show_default=True, help="Occurrences a schedule.")
@common_options
def diff(folder: str, count: int) -> None:
    """List every pending local-time timer, and each schedule's next occurrences, whose UTC
    instant would move under the rules in DIR: key, zone, local time, instant now -> then."""

    async def action(app: AsyncApp) -> list[ZoneMove]:
        return await app.schedules.tzdata_diff(folder, count=count)

    moves = run_app(action, create_namespace=False)
    if config().json:
        output.emit_json({"zoneinfo": folder, "moves": [move.to_dict() for move in moves]})
        return
    console = output.stdout()
    if not moves:
        console.print("nothing would move")
        return
    table = output.new_table(title=f"what {folder} would move")
    for name in ("kind", "key", "zone", "local", "now (UTC)", "then (UTC)"):
        table.add_column(name, overflow="fold")
    for move in moves:
        output.add_row(
            table,
            move.kind,
            move.key,
            move.timezone,
            move.local.isoformat(),
            output.when(move.now_at),
            output.when(move.then_at) if move.then_at is not None else "(cannot resolve)",
        )
    console.print(table)
