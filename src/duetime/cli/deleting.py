"""``duetime delete``: delete finished timers — one by key, a selection of keys, or every one a
filter takes, counted first (``--dry-run`` only counts; a filter's delete asks, or needs
``--yes`` when no one is at the terminal)."""

from __future__ import annotations

import sys

import click

from duetime.app.facade import AsyncApp
from duetime.cli import output
from duetime.cli.context import common_options, config, run_app
from duetime.model import Timer
from duetime.model.audit import describe_target, filter_target
from duetime.timer_filters import timer_filter

FINISHED = ("done", "dead", "cancelled", "expired")


@click.command()
@click.argument("keys", nargs=-1, metavar="[KEY]...")
@click.option("--all", "every", is_flag=True, help="Every finished timer the filter takes.")
@click.option("--status", type=click.Choice(FINISHED), help="Only timers of this status.")
@click.option("--type", "type_", metavar="TYPE", help="Only this event type, or glob ('a.*').")
@click.option("--subject", help="Only timers about this subject.")
@click.option("--due-from", metavar="INSTANT", help="Due at or after (or a duration ago: P1D).")
@click.option("--due-until", metavar="INSTANT", help="Due before (or a duration ago).")
@click.option("--dry-run", is_flag=True, help="Only count the timers it would delete.")
@click.option("--yes", "-y", is_flag=True, help="Delete what --all takes without asking.")
@common_options
def delete(
    keys: tuple[str, ...],
    every: bool,
    status: str | None,
    type_: str | None,
    subject: str | None,
    due_from: str | None,
    due_until: str | None,
    dry_run: bool,
    yes: bool,
) -> None:
    """Delete finished timers (done, dead, cancelled, expired) with their attempts and history:
    KEY, several KEYs, or with --all every one that --status, --type, --subject, --due-from and
    --due-until take. A pending timer is refused (cancel it first); a running one too."""
    narrowing = {
        "status": status,
        "type": type_,
        "subject": subject,
        "due_from": due_from,
        "due_until": due_until,
    }
    narrowed = any(value is not None for value in narrowing.values())
    if every == bool(keys):
        raise click.UsageError("give KEY (one or more) or --all")
    if len(keys) == 1 and not (narrowed or dry_run):
        delete_one(keys[0])
        return

    async def count(app: AsyncApp) -> tuple[int, str]:
        found = timer_filter(**narrowing, now=app.clock.now())
        chosen = list(keys) or None
        total = await app.timers.bulk("delete", found, keys=chosen, dry_run=True)
        return total, describe_target(filter_target(found, chosen))

    matching, described = run_app(count, create_namespace=False)
    if dry_run or not matching:
        report(matching, dry_run=True)
        return
    if every and not yes:
        if not sys.stdin.isatty():
            raise click.UsageError(
                f"{matching} timers would be deleted ({described}): pass --yes to delete them"
            )
        click.confirm(f"Delete {matching} finished timers ({described})?", abort=True)

    async def act(app: AsyncApp) -> int:
        found = timer_filter(**narrowing, now=app.clock.now())
        return await app.timers.bulk("delete", found, keys=list(keys) or None)

    report(run_app(act, create_namespace=False), dry_run=False)


def delete_one(key: str) -> None:
    async def action(app: AsyncApp) -> Timer:
        return await app.timers.delete(key)

    timer = run_app(action, create_namespace=False)
    if config().json:
        output.emit_json({"action": "deleted", "timer": timer.to_dict()})
    else:
        output.stdout().print(output.timer_details(timer, "deleted"))


def report(count: int, *, dry_run: bool) -> None:
    if config().json:
        output.emit_json({"action": "delete", "dry_run": dry_run, "count": count})
    elif dry_run:
        output.stdout().print(f"{count} finished timers would be deleted")
    else:
        output.stdout().print(f"deleted {count} finished timers")
