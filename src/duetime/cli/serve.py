"""``duetime serve``: the REST API, the dashboard and the workers in one process.

It binds 127.0.0.1 unless told otherwise; any other address needs auth on, because a scheduler
reachable from the network without tokens lets anyone schedule anything.
"""

from __future__ import annotations

import logging
from dataclasses import replace

import click

from duetime.api import ApiSettings, create_api, server
from duetime.api.config import DEFAULT_HOST, DEFAULT_PORT, is_loopback
from duetime.api.embed import mount_path, rebuilt_on
from duetime.api.guard import allowed_hosts_for
from duetime.api.http_limits import HEAD_TIMEOUT
from duetime.app.facade import AsyncApp, Store, create_store
from duetime.app.routes_file import RoutesFile, apply_routes, read_routes
from duetime.cli.context import config, database_url_option, log_options
from duetime.cli.worker import (
    load_app,
    load_sources,
    routes_option,
    same_database,
    sources_option,
)
from duetime.config import Settings
from duetime.errors import InvalidInput
from duetime.support.gc_tuning import pace_for_service
from duetime.support.redaction import redact_url

log = logging.getLogger("duetime.cli")


def served_database(users: dict[str, AsyncApp], database_url: str, explicit: bool) -> str:
    """The database the server serves: the apps' own, as ``duetime worker --app`` uses it.

    An app bound to a database (``App("sqlite:///shop.db")``) is served on it, so its
    handlers run where its timers are. Refused, naming the fix, when the apps disagree (one
    server serves one database) or ``--database-url`` names another one."""
    urls = {spec: user.settings.database_url for spec, user in users.items()}
    if not urls:
        return database_url
    (first_spec, first), *others = urls.items()
    for spec, url in others:
        if not same_database(url, first):
            raise InvalidInput(
                "app",
                f"{first_spec} uses {redact_url(first)} but {spec} uses {redact_url(url)}: one "
                "server serves one database; bind both apps to the same one, or serve each "
                "from its own duetime serve",
            )
    if explicit and not same_database(first, database_url):
        raise InvalidInput(
            "database_url",
            f"--database-url {redact_url(database_url)} differs from {first_spec}'s own "
            f"{redact_url(first)}; the app's database is served, so drop the flag or bind the "
            "app to that database",
        )
    return first


def worker_app(spec: str, user: AsyncApp, store: Store) -> AsyncApp:
    """The user's app (``module:attr``) rebuilt on the served store, with its handlers."""
    app = rebuilt_on(user, store)
    if not app.registry.types and not app.routes:
        log.warning("%s registers no handlers and no routes: its worker will claim nothing", spec)
    return app


def routed_apps(
    workers: list[AsyncApp], routes: RoutesFile, store: Store, core: Settings
) -> list[AsyncApp]:
    """Each namespace's routes on its app; a worker app of its own for a namespace without."""
    by_namespace = {app.namespace: app for app in workers}
    apps = list(workers)
    for namespace in routes.namespaces(core.namespace):
        app = by_namespace.get(namespace)
        if app is None:
            settings = replace(core, namespace=namespace)
            app = by_namespace[namespace] = AsyncApp(settings=settings, store=store)
            apps.append(app)
        applied = apply_routes(app, routes)
        log.info(
            "routes of namespace %s: %s",
            namespace,
            "; ".join(f"{r.pattern} → {', '.join(r.to)}" for r in applied),
        )
    for app in apps:
        app.check_routes()
    return apps


def decide_auth(host: str, auth: bool | None) -> bool | None:
    """``None`` (on once a token has been created) on loopback; always on for any other address."""
    if is_loopback(host):
        return auth
    if auth is False:
        raise click.UsageError(
            f"refusing to serve on {host} without auth: anyone who can reach it could read and "
            "schedule timers. Drop --no-auth (and DUETIME_AUTH=false), create a token with "
            "'duetime tokens create --namespace NAME', or bind 127.0.0.1."
        )
    return True


@click.command()
@click.option(
    "--host",
    default=DEFAULT_HOST,
    show_default=True,
    envvar="DUETIME_HOST",
    help="Address to bind; anything but loopback requires auth [env DUETIME_HOST]",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=DEFAULT_PORT,
    show_default=True,
    envvar="DUETIME_PORT",
    help="Port to listen on [env DUETIME_PORT]",
)
@click.option(
    "--app",
    "app_specs",
    multiple=True,
    envvar="DUETIME_APP",
    metavar="MODULE:ATTR",
    help="Your duetime.App or AsyncApp whose handlers the worker runs; repeat for more "
    "namespaces [env DUETIME_APP]",
)
@click.option("--no-worker", is_flag=True, help="Serve the API and dashboard only.")
@click.option(
    "--auth/--no-auth",
    default=None,
    envvar="DUETIME_AUTH",
    help="Require bearer tokens [env DUETIME_AUTH; default: on once a token has been created, "
    "even if revoked since; always on off loopback]",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    envvar="DUETIME_ALLOWED_HOSTS",
    metavar="NAME",
    help="With auth off, a Host name answered besides localhost, 127.0.0.1, [::1] and --host; "
    "repeatable [env DUETIME_ALLOWED_HOSTS, space-separated]",
)
@click.option(
    "--root-path",
    default="",
    envvar="DUETIME_ROOT_PATH",
    metavar="PREFIX",
    help="The prefix a reverse proxy serves this under and strips, e.g. /duetime: links and "
    "/docs then carry it [env DUETIME_ROOT_PATH]",
)
@click.option("--access-log/--no-access-log", default=False, help="Log every request.")
@click.option(
    "--head-timeout",
    type=click.FloatRange(0.1, 3600),
    default=HEAD_TIMEOUT,
    show_default=True,
    envvar="DUETIME_HEAD_TIMEOUT",
    metavar="SECONDS",
    help="Time a client has to send a request's headers; a slower one gets 408 "
    "[env DUETIME_HEAD_TIMEOUT]",
)
@routes_option
@sources_option
@database_url_option()
@log_options()
def serve(
    host: str,
    port: int,
    app_specs: tuple[str, ...],
    no_worker: bool,
    auth: bool | None,
    allowed_hosts: tuple[str, ...],
    root_path: str,
    access_log: bool,
    head_timeout: float,
    routes_spec: str | None,
    sources_spec: str | None,
) -> None:
    """Serve the REST API (/v1, /docs), the dashboard (/) and /metrics, with the workers.

    --routes adds each namespace's routes to its --app's worker; a namespace with routes and no
    --app gets a worker of its own that delivers to the routes' destinations only.
    --sources stores the brokers' schedule requests into the namespace of the first --app
    (without one: DUETIME_NAMESPACE); /metrics counts their messages.
    """
    cfg = config()
    cfg.setup_logging(default="info")
    root_path = mount_path(root_path, "root_path") if root_path else ""
    auth = decide_auth(host, auth)
    core = cfg.settings()
    users = {} if no_worker else {spec: load_app(spec) for spec in app_specs}
    database_url = served_database(users, core.database_url, cfg.database_url_explicit)
    if database_url != core.database_url:
        log.info("serving %s, the database of %s", redact_url(database_url), next(iter(users)))
        core = replace(core, database_url=database_url)
    settings = ApiSettings(
        core=core, auth=auth, allowed_hosts=allowed_hosts_for(host, allowed_hosts)
    )
    routes = read_routes(routes_spec) if routes_spec else None
    store = create_store(settings.core.database_url)
    workers: list[AsyncApp] = []
    if no_worker:
        log.info("--no-worker: serving the API only")
    else:
        workers = [worker_app(spec, user, store) for spec, user in users.items()]
        if routes is not None:
            workers = routed_apps(workers, routes, store, settings.core)
        if not workers:
            log.info("no --app given: no handlers here, so no worker runs in this process")
    sources_app = workers[0] if workers else AsyncApp(settings=settings.core, store=store)
    sources = load_sources(sources_spec, sources_app)
    api = create_api(
        settings, store=store, workers=workers, sources=sources, sources_app=sources_app
    )
    log.info(
        "duetime serving http://%s:%d%s (dashboard /, docs /docs)",
        _url_host(host),
        port,
        f", behind a proxy at {root_path}/" if root_path else "",
    )
    pace_for_service()
    server.run(
        api,
        host,
        port,
        log_level=cfg.log_level or "info",
        access_log=access_log,
        root_path=root_path,
        json_logs=cfg.log_format == "json",
        head_timeout=head_timeout,
    )


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host
