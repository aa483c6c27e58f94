"""``duetime events``: the event log — what fired, newest first, by type and time."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from duetime.app.facade import AsyncApp
from duetime.cli import output
from duetime.cli.context import common_options, config, run_app
from duetime.model import Page
from duetime.model.history import LoggedEvent

if TYPE_CHECKING:  # Rich is imported only when a person reads the output
    from rich.table import Table

WHEN = "ISO 8601 instant (2025-03-15T13:00Z) or duration ago (PT1H, P7D)"


@click.command()
@click.option("--type", "event_type", metavar="TYPE", help="Event type, or glob: 'order.*'.")
@click.option("--since", metavar="WHEN", help=f"Fired at or after: {WHEN}.")
@click.option("--until", metavar="WHEN", help=f"Fired before: {WHEN}.")
@click.option("--limit", type=int, default=50, show_default=True)
@click.option("--cursor", help="Continue a listing (printed after the previous page).")
@common_options
def events(
    event_type: str | None,
    since: str | None,
    until: str | None,
    limit: int,
    cursor: str | None,
) -> None:
    """The event log: timers that fired, newest first, with their deliveries."""

    async def action(app: AsyncApp) -> Page[LoggedEvent]:
        return await app.events.log(
            type=event_type, since=since, until=until, cursor=cursor, limit=limit
        )

    page = run_app(action, create_namespace=False)
    if config().json:
        output.emit_json(
            {"items": [e.to_dict() for e in page.items], "next_cursor": page.next_cursor}
        )
        return
    console = output.stdout()
    if not page.items:
        console.print("no events")
    else:
        console.print(events_table(page.items))
    if page.next_cursor:
        console.print(f"more: pass --cursor {page.next_cursor}", style="dim")


def events_table(items: list[LoggedEvent]) -> Table:
    """One row per event: when it fired, what, where it went, how each delivery ended."""

    table = output.new_table()
    table.add_column("fired_at (UTC)", no_wrap=True)
    for name in ("type", "key", "subject", "status", "deliveries", "last_error"):
        table.add_column(name, overflow="fold")
    for event in items:
        timer = event.timer
        outcomes = [d.outcome.value if d.outcome else "running" for d in event.deliveries]
        target = f" → {timer.destination}" if timer.destination else ""
        output.add_row(
            table,
            output.when(timer.fired_at),
            timer.type + target,
            timer.key,
            output.text(timer.subject),
            timer.status.value,
            ", ".join(outcomes) or "-",
            output.text(timer.last_error),
        )
    return table
