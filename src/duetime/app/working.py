"""An app's worker, wired: its store, handlers, routes and destinations, with its node's
services (rescue, heartbeat, sweep, the schedules' materialiser, retention) and, where the store
takes schedule changes from SQL, the service that applies them."""

from __future__ import annotations

from collections.abc import Sequence

from duetime.app.context import AppContext
from duetime.app.sql_schedules import AppFor, ScheduleChanges
from duetime.bus.routes import Route
from duetime.handlers import HandlerRegistry
from duetime.services.upkeep import worker_services
from duetime.worker import Worker, WorkerObserver


def build_worker(
    context: AppContext,
    registry: HandlerRegistry,
    observers: list[WorkerObserver],
    routes: list[Route],
    app_for: AppFor,
    *,
    types: Sequence[str] | None,
    node_id: str | None,
    materialize: bool,
    maintain: bool,
) -> Worker:
    """See ``AsyncApp.worker``; ``app_for`` makes the app a schedule change from SQL is applied
    through, on the change's namespace."""
    store, clock, settings = context.store, context.clock, context.settings
    worker = Worker(
        store,
        registry,
        settings,
        clock,
        namespace=context.namespace,
        types=types,
        node_id=node_id,
        observers=observers,
        routes=routes,
        destinations={d.name: d for d in context.destinations},
        tracing=context.current_tracing(),
    )
    worker.add_services(
        worker_services(
            store,
            clock,
            settings,
            node_id=worker.node_id,
            namespace=worker.namespace,
            dispatch=worker.dispatch,
            holder=worker,
            materialize=materialize,
            maintain=maintain,
        )
    )
    if materialize and store.sql_access is not None:
        worker.add_services([ScheduleChanges(store, store.sql_access, clock, app_for)])
    return worker
