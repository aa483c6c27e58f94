"""Everything the CLI prints: JSON documents for scripts, Rich tables for people, and errors.

Machine output is one JSON document on stdout; errors go to stderr, as one JSON object with
``--json`` and as one ``error [code] field: message`` line otherwise. Never a traceback for a
:class:`~duetime.errors.DuetimeError`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from duetime.bus.subscribers import Subscribers
from duetime.errors import Conflict, DuetimeError, InvalidInput, NotFound
from duetime.model import JSON, Attempt, Node, PutResult, Timer
from duetime.model.audit import AuditEntry, describe_target
from duetime.model.replays import attempt_count
from duetime.support.escaping import escape_controls, escape_json_controls
from duetime.support.tracebacks import trimmed

if TYPE_CHECKING:  # Rich is imported only when a person reads the output (faster --json)
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

EXIT_ERROR = 1
EXIT_INVALID = 2
EXIT_NOT_FOUND = 3
EXIT_CONFLICT = 4


PIPE_WIDTH = 200
"""Tables written to a pipe or file are laid out this wide, so lines are not wrapped for grep."""


def stdout() -> Console:
    from rich.console import Console

    width = None if sys.stdout.isatty() else PIPE_WIDTH
    return Console(highlight=False, soft_wrap=False, width=width)


def new_table(title: str | None = None) -> Table:
    """A Rich table: boxed on a terminal; piped or redirected, plain columns separated by spaces
    (no box-drawing characters for grep, awk or cut to trip on)."""
    from rich.table import Table

    if sys.stdout.isatty():
        return Table(title=title)
    return Table(title=title, box=None, pad_edge=False, show_edge=False)


def stderr() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def exit_code(error: DuetimeError) -> int:
    """2 bad input, 3 not found, 4 conflict, 1 anything else."""
    if isinstance(error, InvalidInput):
        return EXIT_INVALID
    if isinstance(error, NotFound):
        return EXIT_NOT_FOUND
    if isinstance(error, Conflict):
        return EXIT_CONFLICT
    return EXIT_ERROR


def json_line(document: JSON) -> str:
    """A JSON document as one line a terminal shows as it is: every control character escaped
    (JSON leaves DEL, C1 and the Unicode line separators raw)."""
    return escape_json_controls(json.dumps(document, ensure_ascii=False))


def emit_json(document: JSON) -> None:
    """One JSON document on stdout (plain text: no Rich markup, wrapping or colour)."""
    sys.stdout.write(json_line(document) + "\n")
    sys.stdout.flush()


def error_line(code: str, message: str, field: str | None) -> str:
    if field and not message.startswith(f"{field}: "):
        message = f"{field}: {message}"
    return escape_controls(f"error [{code}] {message}")


def report_error(
    code: str, message: str, field: str | None, *, as_json: bool, hint: str | None = None
) -> None:
    if as_json:
        document = {"code": code, "message": message, "field": field}
        sys.stderr.write(json_line(document) + "\n")
    else:
        sys.stderr.write(error_line(code, message, field) + "\n")
        if hint:
            sys.stderr.write(escape_controls(hint) + "\n")
    sys.stderr.flush()


def report_duetime_error(error: DuetimeError, *, as_json: bool) -> int:
    report_error(error.code, error.message, error.field, as_json=as_json)
    return exit_code(error)


# -- human formatting ------------------------------------------------------------------------
def shown(value: str) -> str:
    """Stored text as a table shows it: control characters escaped, Rich markup inert."""
    from rich.markup import escape

    return escape(escape_controls(value))


def add_row(table: Table, *cells: str | Text) -> None:
    """One row of stored values; text cells are :func:`shown`, styled ``Text`` kept as is."""
    table.add_row(*(shown(cell) if isinstance(cell, str) else cell for cell in cells))


def when(instant: datetime | None) -> str:
    """A UTC instant to the second, e.g. ``2025-03-15T13:00:00Z`` (JSON output keeps micros)."""
    if instant is None:
        return "-"
    return instant.replace(microsecond=0).isoformat().replace("+00:00", "Z")


def text(value: object) -> str:
    return "-" if value is None or value == "" else str(value)


def local_time(timer: Timer) -> str | None:
    if timer.local is None or timer.timezone is None:
        return None
    return f"{timer.local.isoformat()} {timer.timezone}"


def details(rows: Iterable[tuple[str, str]]) -> Table:
    from rich.table import Table

    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column(overflow="fold")
    for name, value in rows:
        add_row(grid, name, value)
    return grid


def timer_details(
    timer: Timer,
    action: str | None = None,
    subscribers: Subscribers | None = None,
    attempts: Sequence[Attempt] | None = None,
) -> Table:
    """``subscribers`` adds how many live nodes would deliver it, and says so when none would.
    ``attempts``, its history, counts its attempts from its latest replay (see
    :mod:`duetime.model.replays`)."""
    rows: list[tuple[str, str]] = []
    if action is not None:
        rows.append(("action", action))
    rows += [
        ("key", timer.key),
        ("type", timer.type),
        ("status", timer.status.value),
        ("due_at", when(timer.due_at)),
    ]
    local = local_time(timer)
    if local is not None:
        rows.append(("local", local))
    if timer.run_at != timer.due_at:
        rows.append(("run_at", when(timer.run_at)))
    optional = [
        ("destination", timer.destination),
        ("producer", timer.producer),
        ("subject", timer.subject),
        ("correlation_id", timer.correlation_id),
        ("expires_after", timer.expires_after),
        ("priority", timer.priority or None),
        ("fired_at", timer.fired_at and when(timer.fired_at)),
        ("completed_at", timer.completed_at and when(timer.completed_at)),
        ("last_error", timer.last_error),
        ("lease_owner", timer.lease_owner),
    ]
    rows += [(name, str(value)) for name, value in optional if value is not None]
    rows += [
        ("attempts", attempt_count(timer, attempts or ()).text()),
        ("registered_at", when(timer.registered_at)),
        ("payload", json.dumps(timer.payload, ensure_ascii=False)),
    ]
    if subscribers is not None:
        count = subscribers.of_timer(timer)
        rows.append(("subscribers", f"{count}" if count else f"0: no subscriber for {timer.type}"))
    return details(rows)


def put_result(result: PutResult, subscribers: Subscribers | None = None) -> Table:
    return timer_details(result.timer, result.action, subscribers)


def report_warnings(warnings: Sequence[dict[str, JSON]], *, as_json: bool) -> None:
    """Each warning on stderr (stdout keeps the answer): a JSON object a line with ``--json``."""
    for warning in warnings:
        if as_json:
            sys.stderr.write(json_line(warning) + "\n")
        else:
            line = f"warning [{warning['code']}] {warning['message']}"
            sys.stderr.write(escape_controls(line) + "\n")
    sys.stderr.flush()


def timers_table(timers: Sequence[Timer], *, with_error: bool = False) -> Table:

    table = new_table()
    table.add_column("key", overflow="fold")
    table.add_column("type", overflow="fold")
    table.add_column("subject", overflow="fold")
    for name in ("status", "due_at (UTC)", "attempts"):
        table.add_column(name, no_wrap=True)
    if with_error:
        table.add_column("last_error", overflow="fold")
    for timer in timers:
        row = [
            timer.key,
            timer.type,
            text(timer.subject),
            timer.status.value,
            when(timer.due_at),
            f"{timer.attempts}/{timer.max_attempts}",
        ]
        if with_error:
            row.append(text(timer.last_error))
        add_row(table, *row)
    return table


def attempts_table(attempts: Sequence[Attempt]) -> Table:

    table = new_table(title="attempts")
    for name in ("#", "node", "claimed", "started", "finished", "outcome", "error"):
        table.add_column(name, overflow="fold")
    for attempt in attempts:
        add_row(
            table,
            str(attempt.number),
            attempt.node_id,
            when(attempt.claimed_at),
            when(attempt.started_at),
            when(attempt.finished_at),
            text(attempt.outcome and attempt.outcome.value),
            text(attempt.error),
        )
    return table


def print_last_traceback(
    console: Console, attempts: Sequence[Attempt], *, full: bool = False
) -> None:
    """The newest failed attempt's traceback, where the on-call engineer looks first (every
    attempt's is in ``--json``): trimmed to the handler's frames unless ``full``, since the
    frames every failure shares (duetime's executor, the thread pool) come first and say
    nothing about this one."""
    failed = [a for a in attempts if a.traceback]
    if not failed:
        return
    last = failed[-1]
    earlier = f" ({len(failed) - 1} earlier in --json)" if len(failed) > 1 else ""
    text = last.traceback if full else trimmed(last.traceback)
    folded = "" if full or text == last.traceback else ", duetime's frames folded (--full)"
    console.print(f"traceback of attempt {last.number}{earlier}{folded}:", style="bold")
    console.out(escape_controls(text or "", keep_lines=True), end="")


def nodes_table(nodes: Sequence[tuple[Node, bool]]) -> Table:
    from rich.text import Text

    from duetime.bus.routes import describe

    table = new_table()
    columns = (
        "id",
        "role",
        "host",
        "pid",
        "started",
        "last heartbeat",
        "in-flight",
        "clock",
        "state",
    )
    for name in (*columns, "subscriptions"):
        table.add_column(name, overflow="fold")
    for node, alive in nodes:
        add_row(
            table,
            node.id,
            node.role,
            node.host,
            str(node.pid),
            when(node.started_at),
            when(node.heartbeat_at),
            str(node.in_flight),
            clock_offset(node.clock_offset),
            Text("alive", style="green") if alive else Text("stale", style="red"),
            text(describe(node.subscriptions) or None),
        )
    return table


def clock_offset(offset: timedelta | None) -> str:
    """A node's wall clock against the database's: ``+1.250 s`` (ahead), ``-0.003 s`` (behind),
    ``db`` when the database runs on the node's own clock or it has not said."""
    if offset is None:
        return "db"
    return f"{-offset.total_seconds():+.3f} s"


def counts_table(counts: dict[str, int], title: str | None = None, label: str = "outcome") -> Table:

    table = new_table(title=title)
    table.add_column(label)
    table.add_column("count", justify="right")
    for name, count in counts.items():
        add_row(table, name, str(count))
    return table


def audit_table(entries: Sequence[AuditEntry]) -> Table:
    """The audit log as an operator reads it: when, who (and through what), what, on what."""
    table = new_table()
    table.add_column("at (UTC)", no_wrap=True)
    table.add_column("actor", overflow="fold")
    table.add_column("via", no_wrap=True)
    table.add_column("action", no_wrap=True)
    table.add_column("count", justify="right", no_wrap=True)
    table.add_column("target", overflow="fold")
    for entry in entries:
        add_row(
            table,
            when(entry.at),
            entry.actor,
            entry.via,
            entry.action,
            str(entry.count),
            describe_target(entry.target),
        )
    return table
