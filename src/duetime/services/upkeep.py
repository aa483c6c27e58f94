"""The services a worker's node runs beside it, built in the order they start."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from duetime.clock import Clock
from duetime.config import Settings
from duetime.dispatch import Dispatch
from duetime.services.base import Service
from duetime.services.materializer import Materializer
from duetime.services.nodes import NodeUpkeep
from duetime.services.rescuer import Rescuer
from duetime.services.retention import Retention
from duetime.services.sweeper import Sweeper
from duetime.store.protocol import HistoryStore, Store


def worker_services(
    store: Store,
    clock: Clock,
    settings: Settings,
    *,
    node_id: str,
    namespace: str,
    dispatch: Dispatch,
    held: Callable[[], Iterable[int]],
    materialize: bool = True,
    maintain: bool = True,
) -> list[Service]:
    """Rescue (first: what dead nodes left goes back before anything is claimed), the node's
    heartbeat, the no-subscriber sweep, and — unless turned off — the schedules' materializer
    and the retention step every ``settings.maintenance_interval``."""
    upkeep = NodeUpkeep(
        store,
        clock,
        settings,
        node_id,
        "worker",
        subscriptions=dispatch.subscriptions,
        held=held,
        dispatch=dispatch,
    )
    rescue_every = settings.rescue_interval.total_seconds()
    services: list[Service] = [
        Rescuer(store, clock, rescue_every, node_id),
        upkeep,
        Sweeper(
            store,
            clock,
            rescue_every,
            namespace,
            dispatch,
            settings.no_subscriber_grace,
            upkeep,
        ),
    ]
    if materialize:
        services.append(Materializer(store, clock, namespace))
    if maintain and isinstance(store, HistoryStore):
        services.append(Retention.from_settings(store, clock, settings))
    return services
