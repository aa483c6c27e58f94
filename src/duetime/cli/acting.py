"""``duetime edit KEY`` and ``duetime schedules run-next NAME``: what an operator changes by
hand — a pending timer's due time or payload, a schedule's next occurrence run now."""

from __future__ import annotations

import json
from typing import Any

import click

from duetime.app.facade import AsyncApp
from duetime.cli import output
from duetime.cli.context import common_options, config, run_app
from duetime.cli.schedules import schedules
from duetime.errors import InvalidInput
from duetime.model import Timer


@click.command("edit")
@click.argument("key")
@click.option("--at", metavar="INSTANT", help="New due instant (ISO 8601).")
@click.option("--delay", metavar="DURATION", help="New due time, this long from now (PT2H).")
@click.option("--local", metavar="WALLTIME", help="New wall-clock due time (with --timezone).")
@click.option("--timezone", metavar="ZONE", help="The zone of --local (IANA name).")
@click.option("--payload", metavar="JSON", help="New payload, as JSON.")
@common_options
def edit(
    key: str,
    at: str | None,
    delay: str | None,
    local: str | None,
    timezone: str | None,
    payload: str | None,
) -> None:
    """Change pending timer KEY's due time or payload (a re-schedule with on_conflict=update:
    the rest of the timer stays; refused once it has fired)."""
    changes: dict[str, Any] = {
        name: value
        for name, value in (("at", at), ("delay", delay), ("local", local), ("timezone", timezone))
        if value is not None
    }
    if payload is not None:
        try:
            changes["payload"] = json.loads(payload)
        except ValueError as exc:
            raise InvalidInput("payload", f"is not JSON: {exc}") from None

    async def action(app: AsyncApp) -> Timer:
        return await app.timers.edit(key, changes)

    timer = run_app(action, create_namespace=False)
    if config().json:
        output.emit_json({"action": "updated", "timer": timer.to_dict()})
    else:
        output.stdout().print(output.timer_details(timer, "updated"))


@schedules.command("run-next")
@click.argument("name")
@common_options
def run_next(name: str) -> None:
    """Run schedule NAME's next occurrence now; the schedule goes on from the one after it."""

    async def action(app: AsyncApp) -> Timer:
        return await app.schedules.run_next_now(name)

    timer = run_app(action, create_namespace=False)
    if config().json:
        output.emit_json({"action": "made_due", "timer": timer.to_dict()})
    else:
        output.stdout().print(output.timer_details(timer, "made due now"))
