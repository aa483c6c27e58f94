"""The FastAPI application factory: one store, facades per namespace, workers, in one lifespan."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from importlib import resources
from typing import TYPE_CHECKING

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from duetime import __version__
from duetime.api import (
    acting,
    audit,
    backfill,
    charts,
    events,
    finding,
    limits,
    live,
    operations,
    plain_routes,
    schedules,
    system,
    timers,
)
from duetime.api.budget import RequestBudget, request_budget
from duetime.api.config import ApiSettings
from duetime.api.errors import install_error_handlers
from duetime.api.guard import RequestGuard
from duetime.api.responses import JSONResponse
from duetime.api.service import Service
from duetime.app.facade import AsyncApp, Store, create_store
from duetime.clock import Clock
from duetime.observability.metrics import Metrics

if TYPE_CHECKING:
    from duetime.sources import Source

DESCRIPTION = """\
duetime's REST API: schedule timers in a timezone, list a subject's history, cancel, emit events
and read the event log, define recurring schedules (cron or intervals in an IANA zone), replay
dead letters. Errors are JSON `{code, message, field}`: branch on `code`, fix `field`.

With auth on, send `Authorization: Bearer dt_…` (a token from `duetime tokens create`); a
namespace the token may not see answers 404, exactly like one that does not exist.
"""


def create_api(
    settings: ApiSettings | None = None,
    *,
    store: Store | None = None,
    metrics: Metrics | None = None,
    workers: Sequence[AsyncApp] = (),
    clock: Clock | None = None,
    sources: Sequence[Source] = (),
    sources_app: AsyncApp | None = None,
) -> FastAPI:
    """Build the API (not started): the lifespan opens ``store`` once, runs ``workers`` on it.

    ``workers`` are facades built with ``store=store`` and their handlers registered; each gets
    ``metrics`` as an observer. Without ``store`` one is created from the settings. ``sources``
    (built on ``sources_app``, a facade on the same store) are consumed alongside the workers,
    their message counts exported as ``duetime_source_messages_total``.
    """
    settings = settings or ApiSettings.from_env()
    store = store or create_store(settings.core.database_url)
    service = Service(
        settings,
        store,
        metrics=metrics or Metrics(),
        workers=workers,
        clock=clock,
        sources=sources,
        sources_app=sources_app,
    )

    @asynccontextmanager
    async def lifespan(api: FastAPI) -> AsyncIterator[None]:
        await service.start()
        try:
            yield
        finally:
            await service.stop()

    api = FastAPI(
        title="duetime",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # served below with Swagger UI's files from this package, not a CDN
        redoc_url=None,
        openapi_url="/openapi.json",
        default_response_class=JSONResponse,  # a route that returns a model is escaped too
    )
    api.state.duetime = service
    api.add_middleware(RequestGuard, service=service)
    api.add_middleware(RequestBudget, budget=request_budget(settings.core))
    install_error_handlers(api)
    api.router.routes.extend(plain_routes.ROUTES)  # first: matched before the documented routes
    api.include_router(operations.router)
    api.include_router(finding.router)
    api.include_router(charts.router)
    api.include_router(acting.router)
    api.include_router(live.router)
    api.include_router(timers.router)
    api.include_router(events.router)
    api.include_router(schedules.router)
    api.include_router(schedules.preview_router)
    api.include_router(backfill.router)
    api.include_router(limits.router)
    api.include_router(audit.router)
    api.include_router(system.router)
    static = resources.files("duetime.api").joinpath("static")
    api.mount("/static", StaticFiles(directory=str(static)), name="static")
    mount_docs(api)
    return api


DOCS_ASSETS = "/docs-assets"


def mount_docs(api: FastAPI) -> None:
    """``/docs``: Swagger UI from the ``swagger-ui-bundle`` package, so the API's reference
    works on a machine without internet (FastAPI's default loads it from a CDN, and the page
    stays blank offline)."""
    import swagger_ui_bundle

    api.mount(
        DOCS_ASSETS,
        StaticFiles(directory=swagger_ui_bundle.swagger_ui_path),
        name="docs-assets",
    )

    @api.get("/docs", include_in_schema=False)
    async def docs(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=f"{root}{api.openapi_url}",
            title=f"{api.title} — API",
            swagger_js_url=f"{root}{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{root}{DOCS_ASSETS}/favicon-32x32.png",
        )


def app_from_env() -> FastAPI:
    """For ``uvicorn --factory duetime.api:app_from_env``: settings from ``DUETIME_*``."""
    return create_api(ApiSettings.from_env())
