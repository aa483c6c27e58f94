"""The ``duetime`` console script: the command group, its global options, and error handling.

Exit codes: 0 ok, 1 other error, 2 bad input or usage, 3 not found, 4 conflict, 130 interrupted.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

import click

from duetime import __version__
from duetime.cli import output
from duetime.cli.acting import edit
from duetime.cli.admin import migrate, nodes, prune
from duetime.cli.audit import audit
from duetime.cli.backfill import backfill
from duetime.cli.context import (
    CliConfig,
    database_url_option,
    json_option,
    log_options,
    namespace_option,
)
from duetime.cli.dead import dead
from duetime.cli.deleting import delete
from duetime.cli.events import events
from duetime.cli.flow_control import limits, pause, resume
from duetime.cli.keys import keys
from duetime.cli.namespaces import namespaces
from duetime.cli.schedules import next_occurrences, schedules
from duetime.cli.sql import sql
from duetime.cli.timers import cancel, emit, list_timers, schedule, show
from duetime.cli.tzdata import tzdata
from duetime.cli.worker import tick, worker
from duetime.errors import DuetimeError
from duetime.support import stdio
from duetime.support.extras import server_missing
from duetime.timemath.tzmath import tzdata_version

LAZY_COMMANDS: dict[str, tuple[str, str]] = {
    "serve": (
        "duetime.cli.serve:serve",
        "Serve the REST API (/v1, /docs), the dashboard (/) and /metrics, with the workers.",
    ),
    "tokens": ("duetime.cli.tokens:tokens", "Create, list and revoke the REST API's tokens."),
}
"""Commands whose modules are heavy (the web stack): imported only when they are run."""


class DuetimeGroup(click.Group):
    """Turns every DuetimeError of a command into one clear line (or JSON) and an exit code."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name in LAZY_COMMANDS:
            module_name, _, attr = LAZY_COMMANDS[cmd_name][0].partition(":")
            try:
                module = importlib.import_module(module_name)
            except ImportError as exc:
                reason = server_missing(exc, f"'duetime {cmd_name}'")
                raise click.ClickException(
                    reason or f"'duetime {cmd_name}' is unavailable here: {exc}"
                ) from exc
            loaded = getattr(module, attr)
            if not isinstance(loaded, click.Command):
                raise TypeError(f"{LAZY_COMMANDS[cmd_name][0]} is not a click command")
            self.add_command(loaded, cmd_name)
            command = loaded
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """List every command; lazy ones by their stored help, without importing them."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(map(len, names), default=0)
        rows = []
        for name in names:
            command = self.commands.get(name)
            if command is None:
                rows.append((name, _short(LAZY_COMMANDS[name][1], limit)))
            elif not command.hidden:
                rows.append((name, command.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except DuetimeError as exc:
            cfg = ctx.ensure_object(CliConfig)
            ctx.exit(output.report_duetime_error(exc, as_json=cfg.json))


@click.group(
    cls=DuetimeGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    invoke_without_command=True,
    no_args_is_help=True,
    subcommand_metavar="COMMAND [ARGS]...",
)
@click.option(
    "--version",
    "show_version",
    is_flag=True,
    help="Show the version (and the tz database's) and exit; with --json as JSON.",
)
@database_url_option(envvar="DUETIME_DATABASE_URL")
@namespace_option(envvar="DUETIME_NAMESPACE")
@json_option
@log_options(envvar=True)
@click.pass_context
def cli(ctx: click.Context, show_version: bool) -> None:
    """duetime: a durable, timezone-aware scheduler.

    Configure with flags or DUETIME_* environment variables; add --json to any command for
    machine output.
    """
    cfg = ctx.ensure_object(CliConfig)
    if show_version:
        # Not an eager option: --json is read first, wherever it stands.
        if cfg.json:
            output.emit_json({"version": __version__, "tzdata": tzdata_version()})
        else:
            click.echo(f"duetime {__version__} (tzdata {tzdata_version()})")
        ctx.exit(0)
    if ctx.invoked_subcommand is None:
        raise click.UsageError("Missing command.", ctx)


for command in (migrate, schedule, emit, list_timers, show, cancel, dead, worker, tick, nodes):
    cli.add_command(command)
cli.add_command(schedules)
schedules.add_command(backfill)
cli.add_command(keys)
cli.add_command(edit)
cli.add_command(next_occurrences)
cli.add_command(tzdata)
cli.add_command(events)
cli.add_command(prune)
cli.add_command(namespaces)
cli.add_command(sql)
cli.add_command(limits)
cli.add_command(pause)
cli.add_command(resume)
cli.add_command(delete)
cli.add_command(audit)


def _short(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: max(limit - 3, 1)].rsplit(" ", 1)[0] + "..."


def _report_usage(exc: click.ClickException, args: Sequence[str]) -> int:
    ctx = getattr(exc, "ctx", None)
    obj = ctx.find_object(CliConfig) if ctx is not None else None
    as_json = (obj is not None and obj.json) or "--json" in args
    field: str | None = None
    code = "usage"
    if isinstance(exc, click.BadParameter):
        code = "invalid_input"
        field = exc.param.name if exc.param is not None else None
    hint = None
    if ctx is not None and isinstance(exc, click.UsageError):
        hint = f"try '{ctx.command_path} --help'"
    output.report_error(code, exc.format_message(), field, as_json=as_json, hint=hint)
    return exc.exit_code


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (the console script passes it to ``sys.exit``).

    Its output is written whole or the command fails: stdout and stderr write through
    :func:`duetime.support.stdio.whole_streams`, whatever mode an event loop or the parent
    process left them in. A reader that went away (``duetime ls | head``) ends the command
    quietly with status 1; any other failure to write is one line on stderr and status 1.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        with stdio.whole_streams():
            return _run(args)
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # nothing more to say, even at exit
        return output.EXIT_ERROR
    except stdio.OutputLost as exc:
        with contextlib.suppress(OSError):
            sys.stderr.write(f"error [output] {exc}\n")
            sys.stderr.flush()
        return output.EXIT_ERROR


def _run(args: list[str]) -> int:
    try:
        result = cli.main(args=args, prog_name="duetime", standalone_mode=False)
    except click.ClickException as exc:
        return _report_usage(exc, args)
    except (click.Abort, KeyboardInterrupt):
        sys.stderr.write("aborted\n")
        return 130
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
