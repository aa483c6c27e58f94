"""``duetime dead``: the dead-letter queue — list it, replay one timer or all of them."""

from __future__ import annotations

import click

from duetime.app.facade import AsyncApp
from duetime.bus.subscribers import Subscribers
from duetime.cli import output
from duetime.cli.context import common_options, config, run_app
from duetime.cli.timers import print_page
from duetime.errors import Conflict
from duetime.model import Page, Timer
from duetime.model.audit import filter_target
from duetime.timer_filters import timer_filter

REPLAY_PAGE = 500


@click.group()
def dead() -> None:
    """The dead-letter queue: timers that ran out of attempts or were declared dead."""


@dead.command("ls")
@click.option("--limit", type=int, default=50, show_default=True)
@click.option("--cursor", help="Continue a listing (printed after the previous page).")
@common_options
def list_dead(limit: int, cursor: str | None) -> None:
    """List dead timers, newest first, with their last error."""

    async def action(app: AsyncApp) -> tuple[Page[Timer], Subscribers]:
        return await app.timers.dead(cursor=cursor, limit=limit), await app.events.subscribers()

    print_page(run_app(action, create_namespace=False), with_error=True)


@dead.command()
@click.argument("key", required=False)
@click.option("--all", "replay_all", is_flag=True, help="Replay every dead timer (--type… narrow).")
@click.option("--type", "type_", help="With --all: only this event type, or glob ('order.*').")
@click.option("--subject", help="With --all: only timers about this subject.")
@click.option("--due-from", help="With --all: due at or after this instant (or 'P1D': ago).")
@click.option("--due-until", help="With --all: due before this instant (or duration ago).")
@common_options
def replay(
    key: str | None,
    replay_all: bool,
    type_: str | None,
    subject: str | None,
    due_from: str | None,
    due_until: str | None,
) -> None:
    """Send dead timer KEY round again, due now, with a fresh set of attempts; or, with --all,
    every dead timer (that --type, --subject, --due-from and --due-until take)."""
    if (key is None) == (not replay_all):
        raise click.UsageError("give either KEY or --all")
    narrowing = {"type": type_, "subject": subject, "due_from": due_from, "due_until": due_until}
    if key is not None and any(value is not None for value in narrowing.values()):
        raise click.UsageError("--type, --subject, --due-from and --due-until go with --all")
    if key is not None:

        async def one(app: AsyncApp) -> Timer:
            return await app.timers.replay(key)

        timer = run_app(one, create_namespace=False)
        if config().json:
            output.emit_json({"action": "replayed", "timer": timer.to_dict()})
        else:
            output.stdout().print(output.timer_details(timer, "replayed"))
        return

    async def every(app: AsyncApp) -> list[str]:
        await app.open()
        target = filter_target(timer_filter(status="dead", **narrowing, now=app.clock.now()))
        replayed: list[str] = []
        actor, app.actor = app.actor, None  # one entry for the whole run, not one per timer
        finished = False
        try:
            await replay_pages(app, replayed)
            finished = True
            return replayed
        finally:
            if not finished:
                target["interrupted"] = True
            if replayed:  # a run that replayed nothing changed nothing: not written
                await app.audit.record("bulk_replay", target, len(replayed), actor=actor)

    async def replay_pages(app: AsyncApp, replayed: list[str]) -> None:
        cursor: str | None = None
        while True:
            # Replayed timers leave the queue; the cursor moves past them, so timers that die
            # again meanwhile are not replayed twice in one run.
            page = await app.timers.history(
                status="dead", **narrowing, cursor=cursor, limit=REPLAY_PAGE
            )
            for timer in page.items:
                try:
                    await app.timers.replay(timer.key)
                except Conflict:  # replayed by someone else meanwhile
                    continue
                replayed.append(timer.key)
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    keys = run_app(every, create_namespace=False)
    if config().json:
        output.emit_json({"replayed": len(keys), "keys": keys})
    else:
        output.stdout().print(f"replayed {len(keys)} dead timers")
