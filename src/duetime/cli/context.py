"""The CLI's shared state (database, namespace, output mode) and how commands open the facade.

``--database-url``, ``--namespace`` and ``--json`` are accepted both before the command
(``duetime --json ls``) and after it (``duetime ls --json``); the later one wins.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from duetime.app.facade import AsyncApp
from duetime.config import DEFAULT_DATABASE_URL, Settings
from duetime.model.audit import Actor
from duetime.observability.logs import LOG_FORMATS, configure
from duetime.support import eventloop

T = TypeVar("T")
FC = TypeVar("FC", bound=Callable[..., Any])

LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


@dataclass
class CliConfig:
    """What the global options said; ``None`` means "not given" (env and defaults apply)."""

    database_url: str | None = None
    namespace: str | None = None
    json: bool = False
    log_level: str | None = None
    log_format: str | None = None
    database_url_explicit: bool = False
    namespace_explicit: bool = False

    def settings(self) -> Settings:
        """Settings from ``DUETIME_*`` variables, overridden by the flags."""
        return Settings.from_env(database_url=self.database_url, namespace=self.namespace)

    def app(self) -> AsyncApp:
        """The facade; its operator calls are audited as made by ``cli:<user>@<host>`` (who
        runs the CLI holds the database itself, no token: the system's user names them)."""
        return AsyncApp(
            settings=self.settings(), producer="cli", create_namespace=False, actor=Actor.cli()
        )

    def setup_logging(self, default: str = "warning") -> None:
        configure(self.log_level or default, self.log_format or "text")


def config() -> CliConfig:
    return click.get_current_context().ensure_object(CliConfig)


def run_app(
    action: Callable[[AsyncApp], Awaitable[T]], *, create_namespace: bool | None = None
) -> T:
    """Run ``action`` with an app on the configured database, then close it.

    ``create_namespace=None`` lets the facade open itself on first use (after it has validated
    the input, so bad input never touches the database). The CLI never creates a namespace
    but with ``duetime namespaces create`` (and ``default``, which every database has): an
    unknown one is an ``unknown_namespace`` error naming ``namespace``.
    """
    app = config().app()

    async def main() -> T:
        try:
            if create_namespace is not None:
                await app.open(create_namespace=create_namespace)
            return await action(app)
        finally:
            await app.close()

    return eventloop.run(main())


# -- options ---------------------------------------------------------------------------------
def _set_database_url(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is not None:
        cfg = ctx.ensure_object(CliConfig)
        cfg.database_url = value
        source = ctx.get_parameter_source(param.name or "")
        if source is click.core.ParameterSource.COMMANDLINE:
            cfg.database_url_explicit = True


def _set_namespace(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is not None:
        cfg = ctx.ensure_object(CliConfig)
        cfg.namespace = value
        source = ctx.get_parameter_source(param.name or "")
        if source is click.core.ParameterSource.COMMANDLINE:
            cfg.namespace_explicit = True


def _set_json(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value:
        ctx.ensure_object(CliConfig).json = True


def _set_log_level(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.ensure_object(CliConfig).log_level = value.lower()


def _set_log_format(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.ensure_object(CliConfig).log_format = value.lower()


def database_url_option(*, envvar: str | None = None) -> Callable[[FC], FC]:
    return click.option(
        "--database-url",
        envvar=envvar,
        default=None,
        expose_value=False,
        callback=_set_database_url,
        metavar="URL",
        help=f"sqlite:///path.db or postgresql://… [env DUETIME_DATABASE_URL; "
        f"default {DEFAULT_DATABASE_URL}]",
    )


def namespace_option(*, envvar: str | None = None) -> Callable[[FC], FC]:
    return click.option(
        "--namespace",
        envvar=envvar,
        default=None,
        expose_value=False,
        callback=_set_namespace,
        metavar="NAME",
        help="Tenant to work in [env DUETIME_NAMESPACE; default 'default']",
    )


def json_option(func: FC) -> FC:
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        default=False,
        expose_value=False,
        callback=_set_json,
        help="Machine output: one JSON document on stdout; errors as JSON on stderr.",
    )(func)


def log_level_option(*, envvar: str | None = None) -> Callable[[FC], FC]:
    return click.option(
        "--log-level",
        envvar=envvar,
        default=None,
        expose_value=False,
        callback=_set_log_level,
        type=click.Choice(LOG_LEVELS, case_sensitive=False),
        help="Logging on stderr [env DUETIME_LOG_LEVEL]",
    )


def log_format_option(*, envvar: str | None = None) -> Callable[[FC], FC]:
    return click.option(
        "--log-format",
        envvar=envvar,
        default=None,
        expose_value=False,
        callback=_set_log_format,
        type=click.Choice(LOG_FORMATS, case_sensitive=False),
        help="text, or one JSON object a line [env DUETIME_LOG_FORMAT; default text]",
    )


def log_options(*, envvar: bool = False) -> Callable[[FC], FC]:
    """``--log-level`` and ``--log-format`` (with their ``DUETIME_*`` variables if ``envvar``)."""

    def decorate(func: FC) -> FC:
        func = log_format_option(envvar="DUETIME_LOG_FORMAT" if envvar else None)(func)
        return log_level_option(envvar="DUETIME_LOG_LEVEL" if envvar else None)(func)

    return decorate


def common_options(func: FC) -> FC:
    """The global options, repeated on each command so they may follow it."""
    func = json_option(func)
    func = namespace_option()(func)
    func = database_url_option()(func)
    return func
