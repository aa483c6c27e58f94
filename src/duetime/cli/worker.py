"""``duetime worker`` and ``duetime tick``: run the handlers of the user's own app object.

``--app module:attr`` names a :class:`duetime.App` or :class:`duetime.AsyncApp`; its own settings
win. A ``--database-url`` or ``--namespace`` given explicitly on the command line is exported as
``DUETIME_DATABASE_URL`` / ``DUETIME_NAMESPACE`` before the module is imported (so an app built
from the environment follows it); if the app still disagrees, that is an error rather than a
silent surprise.

``worker --sources FILE`` also consumes broker sources (NATS subjects, Redis streams) into the
app's namespace, configured as :mod:`duetime.sources.config` describes.

``--routes FILE`` (``DUETIME_ROUTES``) adds the routes of a routes file
(:mod:`duetime.app.routes_file`) for the app's namespace: events of those types go to those
destinations too. With ``--routes``, ``--app`` may be left out: the worker then delivers to the
routes' destinations only."""

from __future__ import annotations

import importlib
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from duetime.app.facade import AsyncApp
from duetime.app.routes_file import RoutesFile, apply_routes, read_routes
from duetime.app.runner import run_process
from duetime.app.sync import App
from duetime.cli import output
from duetime.cli.context import CliConfig, common_options, config, log_options
from duetime.errors import InvalidInput
from duetime.support import eventloop
from duetime.support.gc_tuning import pace_for_service
from duetime.support.redaction import redact_url
from duetime.worker import WorkerStats, new_node_id

if TYPE_CHECKING:
    from duetime.sources import Source

log = logging.getLogger("duetime.cli")
FC = TypeVar("FC", bound=Callable[..., Any])


def load_app(spec: str) -> AsyncApp:
    """Import ``module:attr`` (the working directory is importable) and return its AsyncApp."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise InvalidInput("app", f"{spec!r} must look like module:attribute, e.g. myproject:app")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing and (module_name == missing or module_name.startswith(missing + ".")):
            raise InvalidInput(
                "app", f"no module named {module_name!r} (looked in {cwd} and sys.path)"
            ) from exc
        raise
    target: Any = module
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise InvalidInput("app", f"module {module_name!r} has no attribute {attr!r}") from None
    if isinstance(target, App):
        return target.core
    if isinstance(target, AsyncApp):
        return target
    raise InvalidInput("app", f"{spec} is a {type(target).__name__}, not a duetime App or AsyncApp")


def same_database(left: str, right: str) -> bool:
    prefix = "sqlite:///"
    if left.startswith(prefix) and right.startswith(prefix):
        return Path(left[len(prefix) :]).resolve() == Path(right[len(prefix) :]).resolve()
    return left == right


def adopt(
    core: AsyncApp,
    cfg: CliConfig,
    *,
    concurrency: int | None,
    batch_size: int | None,
    lease: float | None,
) -> None:
    """Check the CLI's explicit flags against the app's settings and apply the worker options."""
    settings = core.settings
    if (
        cfg.database_url_explicit
        and cfg.database_url is not None
        and not same_database(cfg.database_url, settings.database_url)
    ):
        raise InvalidInput(
            "database_url",
            f"--database-url {redact_url(cfg.database_url)} differs from the app's own "
            f"{redact_url(settings.database_url)}; the app's settings win, so drop the flag "
            "or fix the app",
        )
    if cfg.namespace_explicit and cfg.namespace not in (None, core.namespace):
        raise InvalidInput(
            "namespace",
            f"--namespace {cfg.namespace} differs from the app's own {core.namespace}; "
            "the app's settings win, so drop the flag or fix the app",
        )
    changes: dict[str, Any] = {}
    if concurrency is not None:
        changes["concurrency"] = concurrency
    if batch_size is not None:
        changes["batch_size"] = batch_size
    if lease is not None:
        changes["lease"] = timedelta(seconds=lease)
        if settings.heartbeat >= changes["lease"]:
            changes["heartbeat"] = changes["lease"] / 3
    if changes:
        updated = replace(settings, **changes)
        updated.check()
        core.settings = updated


def worker_options(func: FC) -> FC:
    for decorator in reversed(
        [
            click.option(
                "--app",
                "app_spec",
                envvar="DUETIME_APP",
                metavar="MODULE:ATTR",
                help="Your duetime.App or AsyncApp, e.g. examples.birthday:app [env DUETIME_APP]",
            ),
            routes_option,
            click.option("--concurrency", type=int, metavar="N", help="Handlers in flight."),
            click.option("--batch-size", type=int, metavar="N", help="Timers claimed at once."),
            click.option("--lease", type=float, metavar="SECONDS", help="Claim lease length."),
            log_options(),
            common_options,
        ]
    ):
        func = decorator(func)
    return func


def prepare(
    app_spec: str | None,
    concurrency: int | None,
    batch_size: int | None,
    lease: float | None,
    routes_spec: str | None = None,
) -> AsyncApp:
    cfg = config()
    cfg.setup_logging(default="info")
    if app_spec is None and routes_spec is None:
        raise click.UsageError(
            "give --app MODULE:ATTR (your handlers), --routes FILE (destinations), or both"
        )
    routes = read_routes(routes_spec) if routes_spec else None
    if cfg.database_url_explicit and cfg.database_url is not None:
        os.environ["DUETIME_DATABASE_URL"] = cfg.database_url
    if cfg.namespace_explicit and cfg.namespace is not None:
        os.environ["DUETIME_NAMESPACE"] = cfg.namespace
    core = AsyncApp(settings=cfg.settings()) if app_spec is None else load_app(app_spec)
    adopt(core, cfg, concurrency=concurrency, batch_size=batch_size, lease=lease)
    if routes is not None:
        add_routes(core, routes)
    if not core.registry.types and not core.routes:
        log.warning("%s registers no handlers and no routes: nothing will be claimed", app_spec)
    core.check_routes()  # a route to an unknown destination is refused before anything runs
    return core


def routes_option(func: FC) -> FC:
    return click.option(
        "--routes",
        "routes_spec",
        envvar="DUETIME_ROUTES",
        metavar="FILE",
        help='Routes to destinations: a JSON file of {"destinations": {...}, "routes": '
        '[{"type": "order.*", "to": ["hook"]}]} (or that JSON itself) [env DUETIME_ROUTES]',
    )(func)


def add_routes(core: AsyncApp, routes: RoutesFile) -> None:
    """The routes file's routes for ``core``'s namespace; the others are reported, not used."""
    applied = apply_routes(core, routes)
    if applied:
        log.info(
            "routes of namespace %s: %s",
            core.namespace,
            "; ".join(f"{r.pattern} → {', '.join(r.to)}" for r in applied),
        )
    others = [ns for ns in routes.namespaces(core.namespace) if ns != core.namespace]
    if others:
        log.warning(
            "--routes has routes for namespaces %s, but this worker serves %s: ignored",
            ", ".join(others),
            core.namespace,
        )


def sources_option(func: FC) -> FC:
    return click.option(
        "--sources",
        "sources_spec",
        envvar="DUETIME_SOURCES",
        metavar="FILE",
        help="Broker sources to consume alongside the worker: a JSON file of "
        '{name: {"kind": "redis"|"nats", ...}} (or that JSON itself) [env DUETIME_SOURCES]',
    )(func)


def read_sources(value: str) -> str:
    """The JSON text of ``--sources``: the value itself when it is an object, else a file's."""
    if value.lstrip().startswith("{"):
        return value
    try:
        return Path(value).read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidInput("sources", f"cannot read {value}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise InvalidInput("sources", f"{value} is not UTF-8 text") from None


def load_sources(value: str | None, app: AsyncApp) -> list[Source]:
    """The sources ``--sources`` describes, storing into ``app`` (checked, not connected)."""
    if not value:
        return []
    from duetime.sources import sources_from_json

    sources = sources_from_json(read_sources(value), app)
    if not sources:
        log.warning("--sources names no sources")
    return sources


def print_stats(stats: WorkerStats, title: str) -> None:
    outcomes = dict(sorted(stats.outcomes.items()))
    if config().json:
        output.emit_json(
            {
                "claimed": stats.claimed,
                "outcomes": outcomes,
                "total": stats.total(),
                "lost": stats.lost,
            }
        )
        return
    console = output.stdout()
    console.print(f"{title}: claimed {stats.claimed}, finished {stats.total()}")
    if outcomes:
        console.print(output.counts_table(outcomes))
    if stats.lost:
        console.print(f"{stats.lost} outcomes were lost to lease expiry", style="yellow")


@click.command()
@worker_options
@sources_option
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    envvar="DUETIME_METRICS_PORT",
    metavar="PORT",
    help="Serve /metrics (Prometheus), /healthz and /readyz on this port "
    "[env DUETIME_METRICS_PORT]",
)
@click.option(
    "--metrics-host",
    default="127.0.0.1",
    show_default=True,
    envvar="DUETIME_METRICS_HOST",
    metavar="HOST",
    help="Address for --metrics-port; 0.0.0.0 for a scraper on another machine "
    "[env DUETIME_METRICS_HOST]",
)
def worker(
    app_spec: str | None,
    concurrency: int | None,
    batch_size: int | None,
    lease: float | None,
    routes_spec: str | None,
    sources_spec: str | None,
    metrics_port: int | None,
    metrics_host: str,
) -> None:
    """Run handlers until SIGINT or SIGTERM (in-flight work is finished first).

    With --sources, schedule requests arriving on the brokers become timers in the app's
    namespace; each message is acknowledged only once its timer is committed.
    """
    core = prepare(app_spec, concurrency, batch_size, lease, routes_spec)
    sources = load_sources(sources_spec, core)
    node_id = new_node_id()
    settings = core.settings
    log.info(
        "worker %s starting: namespace %s, handlers %s, routes %d, concurrency %d, lease %ss, "
        "event loop %s",
        node_id,
        core.namespace,
        ", ".join(core.registry.types) or "-",
        len(core.routes),
        settings.concurrency,
        settings.lease.total_seconds(),
        eventloop.chosen(),
    )
    if sources:
        log.info("sources: %s", ", ".join(repr(source) for source in sources))
    metrics = None if metrics_port is None else (metrics_host, metrics_port)
    pace_for_service()
    intake = None
    if sources:
        from duetime.sources import SourceIntake

        intake = SourceIntake(core, sources)
    stats = run_process(core, intake=intake, node_id=node_id, metrics=metrics)
    log.info("worker %s stopped", node_id)
    print_stats(stats, "worker stopped")


@click.command()
@worker_options
def tick(
    app_spec: str | None,
    concurrency: int | None,
    batch_size: int | None,
    lease: float | None,
    routes_spec: str | None,
) -> None:
    """Fire everything due now once, wait for it, print what happened (for cron/serverless)."""
    core = prepare(app_spec, concurrency, batch_size, lease, routes_spec)

    async def main() -> WorkerStats:
        try:
            return await core.tick()
        finally:
            await core.close()

    print_stats(eventloop.run(main()), "tick")
