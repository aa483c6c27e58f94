"""The services a worker's node runs beside it, built in the order they start."""

from __future__ import annotations

from duetime.clock import Clock, DatabaseClock
from duetime.config import Settings
from duetime.dispatch import Dispatch
from duetime.services.base import Service
from duetime.services.clocksync import ClockSync
from duetime.services.deadlines import DeadlineWatch
from duetime.services.materializer import Materializer
from duetime.services.nodes import LeaseHolder, NodeUpkeep
from duetime.services.rescuer import Rescuer
from duetime.services.retention import Retention
from duetime.services.sweeper import Sweeper
from duetime.store.protocol import Store


def clock_services(clock: Clock, settings: Settings) -> list[Service]:
    """Keeping a :class:`DatabaseClock` synced, every heartbeat (none for another clock)."""
    if not isinstance(clock, DatabaseClock):
        return []
    return [ClockSync(clock, settings.heartbeat.total_seconds(), settings.clock_warn)]


def worker_services(
    store: Store,
    clock: Clock,
    settings: Settings,
    *,
    node_id: str,
    namespace: str,
    dispatch: Dispatch,
    holder: LeaseHolder,
    materialize: bool = True,
    maintain: bool = True,
) -> list[Service]:
    """The database's clock first (every decision after it compares with it), rescue with the
    no-subscriber sweep (what dead nodes left goes back before anything is claimed), the node's
    heartbeat, and — unless turned off — the schedules' materializer and the
    retention step every ``settings.maintenance_interval``."""
    upkeep = NodeUpkeep(
        store,
        clock,
        settings,
        node_id,
        "worker",
        subscriptions=dispatch.subscriptions,
        holder=holder,
        dispatch=dispatch,
    )
    sweeper = Sweeper(store, namespace, dispatch, settings.no_subscriber_grace, upkeep)
    rescue_every = settings.rescue_interval.total_seconds()
    services: list[Service] = [
        *clock_services(clock, settings),
        Rescuer(store, clock, rescue_every, node_id, settings.lease, sweeper=sweeper),
        upkeep,
    ]
    if materialize:
        services.append(Materializer(store, clock, namespace))
        services.append(DeadlineWatch(store, clock, namespace, max_attempts=settings.max_attempts))
    if maintain:
        services.append(Retention.from_settings(store, clock, settings))
    return services
