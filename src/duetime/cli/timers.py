"""Timer commands: schedule, emit, ls, show, cancel. Flags mirror ``AsyncApp.schedule``."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import click

from duetime.app.facade import AsyncApp
from duetime.bus.subscribers import Subscribers
from duetime.cli import batch, output
from duetime.cli.context import common_options, config, run_app
from duetime.errors import InvalidInput
from duetime.model import JSON, Attempt, OnConflict, Page, PutResult, Timer
from duetime.model.audit import text_target
from duetime.model.moves import TimerMove
from duetime.validation import parse_payload_text

FC = TypeVar("FC", bound=Callable[..., Any])
ON_CONFLICT = ("update", "keep", "error")
PER_TIMER_OPTIONS = (
    "payload",
    "at",
    "delay",
    "local",
    "date",
    "timezone",
    "disambiguation",
    "key",
    "subject",
    "correlation_id",
    "max_attempts",
    "expires_after",
    "priority",
)


def parse_payload(value: str | None) -> JSON:
    """``--payload`` as JSON text, or ``@FILE`` to read the JSON from a file."""
    if value is None:
        return None
    if value.startswith("@"):
        try:
            value = Path(value[1:]).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidInput("payload", f"cannot read {value[1:]}: {exc}") from exc
    return parse_payload_text(value)


async def put_and_subscribers(
    app: AsyncApp, put: Awaitable[PutResult], audited: str
) -> tuple[PutResult, Subscribers]:
    """Store the timer, write it to the audit log as ``audited`` by the CLI's user (an operator
    typed it), and find who would deliver it."""
    result = await put
    await app.audit.record_put(app.actor, audited, result)
    return result, await app.events.subscribers()


def print_put(answer: tuple[PutResult, Subscribers]) -> None:
    """The answer on stdout, and on stderr a warning when no live node would deliver it."""
    result, found = answer
    warnings = found.warnings(result.timer)
    as_json = config().json
    if as_json:
        output.emit_json(
            {"action": result.action, "timer": found.shown(result.timer), "warnings": warnings}
        )
    else:
        output.stdout().print(output.put_result(result, found))
    output.report_warnings(warnings, as_json=as_json)


def print_page(answer: tuple[Page[Timer], Subscribers], *, with_error: bool = False) -> None:
    page, found = answer
    if config().json:
        output.emit_json(
            {"items": [found.shown(t) for t in page.items], "next_cursor": page.next_cursor}
        )
        return
    console = output.stdout()
    if not page.items:
        console.print("no timers")
    else:
        console.print(output.timers_table(page.items, with_error=with_error))
    if page.next_cursor:
        console.print(f"more: pass --cursor {page.next_cursor}", style="dim")


def timer_options(func: FC) -> FC:
    """The per-timer flags shared by ``schedule`` and ``emit``."""
    for decorator in reversed(
        [
            click.option("--payload", metavar="JSON", help="JSON payload, or @FILE."),
            click.option("--key", help="Idempotency key (generated when absent)."),
            click.option("--subject", help="Whom it is about, e.g. a user id."),
            click.option("--correlation-id", metavar="ID"),
            click.option("--max-attempts", type=int, metavar="N"),
            click.option(
                "--priority",
                type=int,
                metavar="0-9",
                help="Among due timers, higher first: 0 normal (default) to 9 most urgent.",
            ),
        ]
    ):
        func = decorator(func)
    return func


@click.command()
@click.argument("event_type", metavar="TYPE", required=False)
@timer_options
@click.option("--at", metavar="INSTANT", help="ISO 8601 with offset, e.g. 2025-03-15T13:00Z.")
@click.option("--delay", metavar="DURATION", help="From now: ISO 8601 (PT90S, P15D) or seconds.")
@click.option("--local", metavar="WALLTIME", help="Wall-clock time in --timezone.")
@click.option("--date", metavar="DATE", help="That day at 00:00 in --timezone (default UTC).")
@click.option("--timezone", metavar="ZONE", help="IANA name, e.g. America/New_York.")
@click.option(
    "--disambiguation",
    metavar="[compatible|earlier|later|reject]",
    help="For local times in a DST gap or overlap (default compatible).",
)
@click.option("--expires-after", metavar="DURATION", help="Stale (expired) when this late.")
@click.option(
    "--on-conflict",
    type=click.Choice(ON_CONFLICT),
    default="update",
    show_default=True,
    help="When the key exists.",
)
@click.option(
    "--from-file",
    metavar="FILE",
    help="JSON Lines of timer requests ('-' = stdin); all validated before any is stored.",
)
@common_options
def schedule(
    event_type: str | None, on_conflict: str, from_file: str | None, **fields: Any
) -> None:
    """Schedule a timer of event TYPE (or many with --from-file)."""
    conflict = cast(OnConflict, on_conflict)
    if from_file is not None:
        given = [name for name in PER_TIMER_OPTIONS if fields.get(name) is not None]
        if event_type is not None or given:
            extra = "TYPE" if event_type is not None else "--" + given[0].replace("_", "-")
            raise click.UsageError(f"{extra} cannot be combined with --from-file")
        schedule_file(from_file, conflict)
        return
    if event_type is None:
        raise click.UsageError("missing argument TYPE (or give --from-file)")
    payload = parse_payload(fields.pop("payload"))
    disambiguation = fields.pop("disambiguation") or "compatible"

    async def action(app: AsyncApp) -> tuple[PutResult, Subscribers]:
        put = app.schedule(
            event_type, payload, disambiguation=disambiguation, on_conflict=conflict, **fields
        )
        return await put_and_subscribers(app, put, "schedule")

    print_put(run_app(action))


def schedule_file(path: str, on_conflict: OnConflict) -> None:
    cfg = config()
    show_progress = not cfg.json and sys.stderr.isatty()

    async def action(app: AsyncApp) -> dict[str, int]:
        with batch.open_source(path) as source:
            timers = batch.validate(app, batch.read_lines(source))
        counts = await batch.store(app, timers, on_conflict, show_progress=show_progress)
        changed = counts["created"] + counts["updated"]
        if changed:  # one entry for the file, as for any bulk action; none if all were kept
            target: dict[str, JSON] = {
                "file": text_target(path),
                "created": counts["created"],
                "updated": counts["updated"],
            }
            await app.audit.record("schedule_file", target, changed)
        return {**counts, "total": len(timers)}

    counts = run_app(action)
    if cfg.json:
        output.emit_json(counts)
    else:
        output.stdout().print(output.counts_table(counts, title="scheduled", label="action"))


@click.command()
@click.argument("event_type", metavar="TYPE")
@timer_options
@common_options
def emit(event_type: str, payload: str | None, **fields: Any) -> None:
    """Emit an event of TYPE now (a timer due at once; an existing key is kept)."""
    data = parse_payload(payload)

    async def action(app: AsyncApp) -> tuple[PutResult, Subscribers]:
        return await put_and_subscribers(app, app.emit(event_type, data, **fields), "emit")

    print_put(run_app(action))


@click.command("ls")
@click.option("--subject", help="Only timers about this subject.")
@click.option("--status", help="scheduled, running, retrying, done, dead, cancelled, expired.")
@click.option("--type", "event_type", metavar="TYPE", help="Only this event type, or glob (a.*).")
@click.option("--due-from", metavar="INSTANT", help="Due at or after (or a duration ago: P1D).")
@click.option("--due-until", metavar="INSTANT", help="Due before (or a duration ago).")
@click.option(
    "--payload",
    metavar="PATH=VALUE",
    help='Only timers whose payload holds VALUE at PATH: customer.id=42, status="paid".',
)
@click.option(
    "--sort",
    default="newest",
    show_default=True,
    help="newest, due (earliest first), updated (latest first) or attempts (most first).",
)
@click.option("--schedule", metavar="NAME", help="Only the occurrences of this schedule.")
@click.option("--limit", type=int, default=50, show_default=True)
@click.option("--cursor", help="Continue a listing (printed after the previous page).")
@common_options
def list_timers(
    subject: str | None,
    status: str | None,
    event_type: str | None,
    due_from: str | None,
    due_until: str | None,
    payload: str | None,
    sort: str,
    schedule: str | None,
    limit: int,
    cursor: str | None,
) -> None:
    """List timers, newest first (or as --sort says)."""

    async def action(app: AsyncApp) -> tuple[Page[Timer], Subscribers]:
        page = await app.timers.history(
            subject,
            status=status,
            type=event_type,
            due_from=due_from,
            due_until=due_until,
            payload=payload,
            sort=sort,
            cursor=cursor,
            limit=limit,
            schedule=schedule,
        )
        return page, await app.events.subscribers()

    print_page(run_app(action, create_namespace=False))


@click.command()
@click.argument("key")
@click.option(
    "--full",
    is_flag=True,
    help="The whole traceback, duetime's and the thread pool's frames too (--json has both).",
)
@common_options
def show(key: str, full: bool) -> None:
    """Show one timer, its attempts and its moves by new zone rules; the newest traceback
    with the handler's frames first (duetime's own folded: --full for every frame)."""

    async def action(app: AsyncApp) -> tuple[Timer, list[Attempt], list[TimerMove], Subscribers]:
        timer = await app.get(key)
        return (
            timer,
            await app.timers.attempts(key),
            await app.timers.moves(key),
            await app.events.subscribers(),
        )

    timer, attempts, moves, found = run_app(action, create_namespace=False)
    if config().json:
        output.emit_json(
            {
                "timer": found.shown(timer),
                "attempts": [a.to_dict() for a in attempts],
                "moves": [m.to_dict() for m in moves],
            }
        )
        return
    console = output.stdout()
    console.print(output.timer_details(timer, subscribers=found, attempts=attempts))
    if moves:
        table = output.new_table(title="moved by new zone rules")
        for name in ("when", "why", "local", "zone", "from (UTC)", "to (UTC)"):
            table.add_column(name, overflow="fold")
        for move in moves:
            output.add_row(
                table,
                output.when(move.moved_at),
                move.reason,
                move.local.isoformat(),
                move.timezone,
                output.when(move.from_at),
                output.when(move.to_at),
            )
        console.print(table)
    if attempts:
        console.print(output.attempts_table(attempts))
        output.print_last_traceback(console, attempts, full=full)
    else:
        console.print("no attempts yet", style="dim")


@click.command()
@click.argument("key")
@common_options
def cancel(key: str) -> None:
    """Cancel a timer that has not fired yet (a conflict once it has)."""

    async def action(app: AsyncApp) -> Timer:
        return await app.cancel(key)

    timer = run_app(action, create_namespace=False)
    if config().json:
        output.emit_json({"action": "cancelled", "timer": timer.to_dict()})
    else:
        output.stdout().print(output.timer_details(timer, "cancelled"))
