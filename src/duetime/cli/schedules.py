"""Schedule commands: ``schedules add|update|ls|show|pause|resume|rm`` and ``next`` (preview).

Flags mirror ``AsyncApp.add_schedule``; every command takes ``--json``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

from duetime.app.facade import AsyncApp
from duetime.cli import output
from duetime.cli.calendar_options import calendar_options, calendar_values
from duetime.cli.context import common_options, config, run_app
from duetime.cli.deadlines import deadline_cell, deadline_rows
from duetime.cli.timers import parse_payload
from duetime.model import JSON, OnConflict, Page, Schedule, iso
from duetime.schedules import ScheduleAction, recurrence_of
from duetime.support import eventloop
from duetime.timemath.recurrence import CATCH_UP, ON_GAP, ON_OVERLAP, describe, parse_recurrence
from duetime.timemath.recurrence.overlap import OVERLAP
from duetime.timemath.tzmath import load_zone

if TYPE_CHECKING:
    from rich.table import Table

    from duetime.timemath.recurrence.calendar import Calendar

FC = TypeVar("FC", bound=Callable[..., Any])
PREVIEW = 5


def rule_options(func: FC) -> FC:
    """The flags that define a schedule (shared by ``add`` and ``update``)."""
    for decorator in reversed(
        [
            click.option("--cron", metavar="EXPR", help="5-field cron expression or @daily etc."),
            click.option("--every", metavar="DURATION", help="Fixed interval: PT5M, or seconds."),
            click.option("--timezone", metavar="ZONE", help="IANA zone of the cron [UTC]."),
            click.option("--payload", metavar="JSON", help="JSON payload, or @FILE."),
            click.option("--subject", help="Whom it is about, e.g. a user id."),
            click.option("--start-at", metavar="INSTANT", help="First possible occurrence."),
            click.option("--end-at", metavar="INSTANT", help="Last possible occurrence."),
            click.option(
                "--catch-up",
                type=click.Choice(CATCH_UP),
                help="After an outage: latest (default), all or none.",
            ),
            click.option(
                "--on-gap",
                type=click.Choice(ON_GAP),
                help="Fixed-time cron in a DST gap [run_after].",
            ),
            click.option(
                "--on-overlap",
                type=click.Choice(ON_OVERLAP),
                help="Fixed-time cron in a repeated hour [once].",
            ),
            click.option("--max-attempts", type=int, metavar="N"),
            click.option(
                "--overlap",
                type=click.Choice(OVERLAP),
                help="An occurrence due while an earlier one is unfinished: allow (default) "
                "fires it, skip records it skipped, buffer_one fires it when that one ends.",
            ),
            click.option(
                "--catch-up-grace",
                metavar="DURATION",
                help="How late an occurrence may be and still fire: PT5M, or seconds [60]; "
                "past it, --catch-up decides.",
            ),
            click.option(
                "--must-succeed-within",
                metavar="DURATION",
                help="Each occurrence's deadline after its instant: PT30M, or seconds; one not "
                "done by then is missed (a schedule.missed event).",
            ),
            click.option(
                "--pause-after-failures",
                type=int,
                metavar="N",
                help="Pause after N missed or dead occurrences in a row.",
            ),
            click.option(
                "--window",
                metavar="DURATION",
                help="Run each occurrence at a deterministic instant within [due, due + "
                "DURATION], at most the rule's period.",
            ),
        ]
    ):
        func = decorator(func)
    return func


@click.group("schedules")
def schedules() -> None:
    """Recurring schedules: cron, fixed intervals or RFC 5545 rules, each occurrence a timer."""


@schedules.command("add")
@click.argument("name")
@click.argument("event_type", metavar="TYPE")
@rule_options
@calendar_options
@click.option("--paused", is_flag=True, help="Create it paused.")
@click.option(
    "--on-conflict",
    type=click.Choice(("update", "keep", "error")),
    default="update",
    show_default=True,
    help="When the name exists.",
)
@common_options
def add(
    name: str,
    event_type: str,
    payload: str | None,
    paused: bool,
    on_conflict: str,
    **fields: Any,
) -> None:
    """Create schedule NAME firing events of TYPE (or update it to this definition)."""
    data = parse_payload(payload)
    calendar = calendar_values(fields)
    given = {key: value for key, value in fields.items() if value is not None} | calendar

    async def action(app: AsyncApp) -> tuple[ScheduleAction, Schedule]:
        return await app.schedules.add(
            name,
            event_type,
            data,
            active=False if paused else None,
            on_conflict=cast(OnConflict, on_conflict),
            **given,
        )

    print_action(*run_app(action))


@schedules.command("update")
@click.argument("name")
@click.option("--type", "event_type", metavar="TYPE", help="The event type it fires.")
@rule_options
@calendar_options
@common_options
def update(name: str, event_type: str | None, payload: str | None, **fields: Any) -> None:
    """Change some fields of schedule NAME; its next occurrence is recomputed."""
    calendar = calendar_values(fields)
    changes = {key: value for key, value in fields.items() if value is not None} | calendar
    if event_type is not None:
        changes["type"] = event_type
    if payload is not None:
        changes["payload"] = parse_payload(payload)
    if not changes:
        raise click.UsageError("nothing to change: give at least one option")

    async def action(app: AsyncApp) -> Schedule:
        return await app.schedules.update(name, **changes)

    print_action("updated", run_app(action, create_namespace=False))


@schedules.command("ls")
@click.option("--subject", help="Only schedules about this subject.")
@click.option("--type", "event_type", metavar="TYPE", help="Only this event type.")
@click.option("--active/--paused", default=None, help="Only running / only paused ones.")
@click.option("--limit", type=int, default=50, show_default=True)
@click.option("--cursor", help="Continue a listing (printed after the previous page).")
@common_options
def list_schedules(
    subject: str | None,
    event_type: str | None,
    active: bool | None,
    limit: int,
    cursor: str | None,
) -> None:
    """List schedules by name."""

    async def action(app: AsyncApp) -> Page[Schedule]:
        return await app.schedules.list(
            subject=subject, type=event_type, active=active, cursor=cursor, limit=limit
        )

    page = run_app(action, create_namespace=False)
    if config().json:
        output.emit_json(
            {"items": [s.to_dict() for s in page.items], "next_cursor": page.next_cursor}
        )
        return
    console = output.stdout()
    console.print(schedules_table(page.items) if page.items else "no schedules")
    if page.next_cursor:
        console.print(f"more: pass --cursor {page.next_cursor}", style="dim")


@schedules.command("show")
@click.argument("name")
@click.option("--count", type=int, default=PREVIEW, show_default=True, help="Occurrences shown.")
@common_options
def show(name: str, count: int) -> None:
    """Show schedule NAME and its next occurrences."""

    async def action(app: AsyncApp) -> tuple[Schedule, list[datetime]]:
        schedule = await app.schedules.get(name)
        upcoming = (
            await app.schedules.preview(schedule=name, count=count) if schedule.active else []
        )
        return schedule, upcoming

    schedule, upcoming = run_app(action, create_namespace=False)
    if config().json:
        output.emit_json(
            {
                "schedule": schedule.to_dict(),
                "description": describe(recurrence_of(schedule)),
                "next": occurrences_json(upcoming, schedule.timezone),
            }
        )
        return
    console = output.stdout()
    console.print(schedule_details(schedule))
    if upcoming:
        console.print(occurrences_table(upcoming, schedule.timezone))
    elif not schedule.active:
        console.print("paused: no occurrences until resumed", style="dim")


def _state_command(verb: str, past: str, doc: str) -> click.Command:
    @click.argument("name")
    @common_options
    def command(name: str) -> None:
        async def action(app: AsyncApp) -> Schedule:
            method = app.schedules.pause if verb == "pause" else app.schedules.resume
            return await method(name)

        print_action(past, run_app(action, create_namespace=False))

    command.__doc__ = doc
    return click.command(verb)(command)


schedules.add_command(
    _state_command("pause", "paused", "Pause schedule NAME (occurrences made ahead are withdrawn).")
)
schedules.add_command(
    _state_command("resume", "resumed", "Resume schedule NAME from its next occurrence after now.")
)


@schedules.command("rm")
@click.argument("name")
@common_options
def remove(name: str) -> None:
    """Delete schedule NAME; its pending occurrences are cancelled."""

    async def action(app: AsyncApp) -> tuple[Schedule, int]:
        return await app.schedules.delete(name)

    schedule, cancelled = run_app(action, create_namespace=False)
    if config().json:
        output.emit_json(
            {"action": "deleted", "schedule": schedule.to_dict(), "cancelled": cancelled}
        )
        return
    output.stdout().print(
        f"deleted schedule {schedule.name}; cancelled {cancelled} pending occurrence"
        + ("" if cancelled == 1 else "s")
    )


@click.command("next")
@click.argument("cron", required=False)
@click.option("--every", metavar="DURATION", help="A fixed interval instead of a cron.")
@click.option("--timezone", metavar="ZONE", default="UTC", show_default=True)
@click.option("--after", metavar="INSTANT", help="Start after this instant [now].")
@click.option("--count", type=int, default=PREVIEW, show_default=True)
@click.option("--on-gap", type=click.Choice(ON_GAP), default="run_after", show_default=True)
@click.option("--on-overlap", type=click.Choice(ON_OVERLAP), default="once", show_default=True)
@click.option("--schedule", "schedule_name", metavar="NAME", help="A stored schedule's rule.")
@calendar_options
@common_options
def next_occurrences(
    cron: str | None,
    every: str | None,
    timezone: str,
    after: str | None,
    count: int,
    on_gap: str,
    on_overlap: str,
    schedule_name: str | None,
    **fields: Any,
) -> None:
    """Preview the next occurrences of a CRON expression (or --every, --rrule, or --schedule
    NAME). An --rrule without --after lists from its --dtstart on."""
    calendar = calendar_values(fields)
    rrule = calendar.get("rrule")
    if schedule_name is not None and (cron is not None or every is not None or rrule):
        raise click.UsageError("--schedule cannot be combined with CRON, --every or --rrule")
    if schedule_name is None and cron is None and every is None and rrule is None:
        raise click.UsageError("give a CRON expression, --every, --rrule or --schedule NAME")

    async def action(app: AsyncApp) -> tuple[list[datetime], str, str]:
        if schedule_name is not None:
            schedule = await app.schedules.get(schedule_name)
            upcoming = await app.schedules.preview(schedule=schedule_name, after=after, count=count)
            return upcoming, schedule.timezone, describe(recurrence_of(schedule))
        upcoming = await app.schedules.preview(
            cron,
            every=every,
            timezone=timezone,
            on_gap=on_gap,
            on_overlap=on_overlap,
            after=after,
            count=count,
            **calendar,
        )
        options = {k: v for k, v in calendar.items() if k != "rrule"}
        rule = parse_recurrence(
            cron=cron,
            every=every,
            timezone=timezone,
            on_gap=on_gap,
            on_overlap=on_overlap,
            rrule=rrule,
            calendar=options if rrule is not None else None,
        )
        return upcoming, timezone, describe(rule)

    if schedule_name is None:
        upcoming, zone, description = _run_without_database(action)
    else:
        upcoming, zone, description = run_app(action, create_namespace=False)
    if config().json:
        output.emit_json(
            {
                "timezone": zone,
                "description": description,
                "occurrences": occurrences_json(upcoming, zone),
            }
        )
        return
    console = output.stdout()
    console.print(description)
    console.print(occurrences_table(upcoming, zone) if upcoming else "no occurrences")


def _run_without_database(action: Callable[[AsyncApp], Any]) -> Any:
    """A preview of a rule needs no database: the app is never opened."""
    return eventloop.run(action(config().app()))


# -- output ----------------------------------------------------------------------------------
def print_action(action: str, schedule: Schedule) -> None:
    if config().json:
        output.emit_json({"action": action, "schedule": schedule.to_dict()})
    else:
        output.stdout().print(schedule_details(schedule, action))


def rule_text(schedule: Schedule) -> str:
    if schedule.calendar is not None:
        start = schedule.calendar.dtstart.isoformat()
        return f"rrule {schedule.calendar.rrule} from {start} ({schedule.timezone})"
    if schedule.cron is not None:
        return f"cron {schedule.cron} ({schedule.timezone})"
    assert schedule.every is not None
    return f"every {schedule.every.total_seconds():g}s"


def schedule_details(schedule: Schedule, action: str | None = None) -> Table:
    rows: list[tuple[str, str]] = []
    if action is not None:
        rows.append(("action", action))
    rows += [
        ("name", schedule.name),
        ("type", schedule.type),
        ("rule", rule_text(schedule)),
        ("describe", describe(recurrence_of(schedule))),
        ("state", "active" if schedule.active else "paused"),
        ("next_at", output.when(schedule.next_at) if schedule.active else "-"),
        ("last_at", output.when(schedule.last_at)),
        ("catch_up", schedule.catch_up),
        ("catch_up_grace", f"{schedule.catch_up_grace.total_seconds():g}s"),
        ("overlap", schedule.overlap),
        *deadline_rows(schedule),
    ]
    if schedule.window is not None:
        rows.append(("window", str(schedule.window)))
    if schedule.cron is not None or schedule.calendar is not None:
        rows.append(("dst", f"on_gap={schedule.on_gap} on_overlap={schedule.on_overlap}"))
    if schedule.calendar is not None:
        rows += calendar_rows(schedule.calendar)
    optional = [
        ("subject", schedule.subject),
        ("start_at", schedule.start_at and output.when(schedule.start_at)),
        ("end_at", schedule.end_at and output.when(schedule.end_at)),
    ]
    rows += [(name, str(value)) for name, value in optional if value is not None]
    rows += [
        ("max_attempts", str(schedule.max_attempts)),
        ("payload", json.dumps(schedule.payload, ensure_ascii=False)),
    ]
    return output.details(rows)


def calendar_rows(calendar: Calendar) -> list[tuple[str, str]]:
    """What decides a calendar rule's days besides the RRULE: its exceptions and extra dates,
    the business calendar (holidays, weekend, what a non-business day does) and 29 February.
    The lists are shown when they hold something; the rest always, defaults included, so what
    is shown is the whole rule."""
    fields = calendar.to_dict()
    rows = [(name, ", ".join(fields[name])) for name in ("exdates", "rdates") if fields[name]]
    rows.append(("holidays", output.text(fields["holidays"])))
    if fields["holiday_dates"]:
        rows.append(("holiday_dates", ", ".join(fields["holiday_dates"])))
    rows += [
        ("weekend", ", ".join(fields["weekend"])),
        ("roll", output.text(fields["roll"])),
        ("feb29", fields["feb29"]),
    ]
    return rows


def schedules_table(items: Sequence[Schedule]) -> Table:

    table = output.new_table()
    for name in ("name", "type", "rule", "subject", "state", "next_at (UTC)", "deadline"):
        table.add_column(name, overflow="fold")
    for schedule in items:
        output.add_row(
            table,
            schedule.name,
            schedule.type,
            rule_text(schedule),
            output.text(schedule.subject),
            "active" if schedule.active else "paused",
            output.when(schedule.next_at) if schedule.active else "-",
            deadline_cell(schedule),
        )
    return table


def local_iso(instant: datetime, timezone: str) -> str:
    """The wall-clock time with its offset, e.g. ``2025-03-09T03:00:00-04:00``."""
    return instant.astimezone(load_zone(timezone)).isoformat()


def occurrences_json(instants: Sequence[datetime], timezone: str) -> list[JSON]:
    return [{"utc": iso(instant), "local": local_iso(instant, timezone)} for instant in instants]


def occurrences_table(instants: Sequence[datetime], timezone: str) -> Table:

    table = output.new_table(title="next occurrences")
    table.add_column("#", justify="right")
    table.add_column("UTC", no_wrap=True)
    table.add_column(f"local ({timezone})", no_wrap=True)
    for number, instant in enumerate(instants, 1):
        table.add_row(str(number), output.when(instant), local_iso(instant, timezone))
    return table


__all__ = ["next_occurrences", "schedules"]
