"""``duetime schedules backfill NAME --from A --to B``: a schedule's occurrences over a past
range, made as timers keyed as the materialiser keys them (``--dry-run`` lists them first)."""

from __future__ import annotations

import click

from duetime.app.facade import AsyncApp
from duetime.cli import output
from duetime.cli.context import common_options, config, run_app
from duetime.model.backfill import Backfill


@click.command("backfill")
@click.argument("name")
@click.option("--from", "from_", required=True, metavar="INSTANT", help="First instant (ISO).")
@click.option("--to", required=True, metavar="INSTANT", help="Last instant, not in the future.")
@click.option("--dry-run", is_flag=True, help="List the occurrences; write nothing.")
@click.option("--yes", is_flag=True, help="Confirm a range of over 10,000 occurrences.")
@common_options
def backfill(name: str, from_: str, to: str, dry_run: bool, yes: bool) -> None:
    """Make the occurrences schedule NAME would have had between --from and --to (both
    included) as timers. A key already stored is kept, so nothing runs twice; flow control
    paces them as any due timer."""

    async def action(app: AsyncApp) -> Backfill:
        return await app.schedules.backfill(name, from_=from_, to=to, dry_run=dry_run, yes=yes)

    report = run_app(action, create_namespace=False)
    if config().json:
        output.emit_json(report.to_dict())
        return
    console = output.stdout()
    if dry_run:
        table = output.new_table(f"{name}: {len(report.occurrences)} occurrence(s), dry run")
        for column in ("due_at (UTC)", "key", "stored already"):
            table.add_column(column, overflow="fold")
        for occurrence in report.occurrences:
            stored = "yes" if occurrence.existed else "no"
            table.add_row(output.when(occurrence.due_at), occurrence.key, stored)
        console.print(table)
        return
    console.print(
        f"{name}: {report.created} created, {report.existing} stored already "
        f"({len(report.occurrences)} occurrence(s) from {report.start.isoformat()} "
        f"to {report.end.isoformat()})"
    )
