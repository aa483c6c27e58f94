"""A service-call timer: ScheduleTimer commands in, DueTimeReached events out, on NATS.

Commands ``{"tenantId", "serviceCallId", "dueAt"}`` arrive on a JetStream subject. duetime stores
each as the timer ``"<tenantId>:<serviceCallId>"`` (a second command for the same call moves its
due time while it has not fired; once fired it is left alone) and acknowledges the command only
after the timer is committed. At ``dueAt`` the worker publishes DueTimeReached to another
JetStream subject in the orchestration module's own envelope ``{id, type, tenantId,
correlationId, timestampMs, payload}`` (:data:`DUE_TIME_REACHED_ENVELOPE`, a ``template``
format: no encoding code), with
``Nats-Msg-Id`` set to the envelope's ``id`` so JetStream drops a redelivered duplicate.
Malformed commands go to ``<commands subject>.dead`` with the reason in headers.

What this fixes in a polling design: no 5-second polling (the worker sleeps until the next due
instant and is woken when an earlier timer is stored), publish-then-mark is replaced by fenced
leases with retries and a dead-letter queue, and bad commands are kept with their reason rather
than logged and lost.

The database comes from ``DUETIME_DATABASE_URL`` (default ``sqlite:///service_call_timer.db``),
NATS from ``NATS_URL`` (default ``nats://127.0.0.1:4222``).
"""

from __future__ import annotations

import asyncio
import os
import re
from dataclasses import dataclass, replace

import nats

import duetime
from duetime.destinations import deliver_event
from duetime.destinations.nats import NatsDestination
from duetime.model import iso
from duetime.sources import ScheduleCommand, run_worker_with_sources
from duetime.sources.nats_source import NatsSource, ensure_stream

DATABASE_URL = os.environ.get("DUETIME_DATABASE_URL") or "sqlite:///service_call_timer.db"
NATS_URL = os.environ.get("NATS_URL") or "nats://127.0.0.1:4222"
PREFIX = "service-calls.timer"
DUE_TIME_REACHED = "DueTimeReached"
"""The event type of a timer that came from a ScheduleTimer command (and of the event sent)."""
DUE_TIME_REACHED_ENVELOPE = {
    "id": "{delivery_id}",
    "type": "{type}",
    "tenantId": "{payload.tenantId}",
    "correlationId": "{correlation_id}",
    "timestampMs": "{sent_at_ms}",
    "payload": "{payload}",
}
"""The orchestrator's event envelope, filled per delivery. ``id`` is the delivery id: the same on
every attempt, so the orchestrator (which must be idempotent on DueTimeReached) deduplicates on it;
``timestampMs`` is when this attempt publishes (epoch milliseconds)."""


@dataclass(frozen=True, slots=True)
class Topology:
    """Where commands come from and events go: subjects and the JetStream streams holding them."""

    nats_url: str = NATS_URL
    prefix: str = PREFIX
    durable: str = "timer-service"

    @property
    def commands_subject(self) -> str:
        return f"{self.prefix}.schedule-timer"

    @property
    def dead_subject(self) -> str:
        return f"{self.commands_subject}.dead"

    @property
    def events_subject(self) -> str:
        return f"{self.prefix}.due-time-reached"

    @property
    def commands_stream(self) -> str:
        return _stream_name(self.prefix, "COMMANDS")

    @property
    def events_stream(self) -> str:
        return _stream_name(self.prefix, "EVENTS")


def _stream_name(prefix: str, suffix: str) -> str:
    return f"{re.sub(r'[^A-Za-z0-9]+', '_', prefix).upper()}_{suffix}"


class ServiceCallTimer:
    """The timer service: a NATS source of commands, a worker, and a NATS destination for events."""

    def __init__(
        self,
        database_url: str | None = None,
        *,
        topology: Topology | None = None,
        clock: duetime.Clock | None = None,
    ) -> None:
        self.topology = topology or Topology()
        self.app = duetime.AsyncApp(database_url or DATABASE_URL, clock=clock)
        self.destination = NatsDestination(
            "due-time-reached",
            self.topology.nats_url,
            self.topology.events_subject,
            format={"template": DUE_TIME_REACHED_ENVELOPE},
        )
        self.app.handler(DUE_TIME_REACHED)(self.publish_due_time_reached)
        self.source = NatsSource(
            self.app,
            self.topology.nats_url,
            self.topology.commands_subject,
            command=ScheduleCommand.named("schedule_timer"),
            durable=self.topology.durable,
            stream=self.topology.commands_stream,
            create_stream=True,
            dead_subject=self.topology.dead_subject,
            name="schedule-timer",
        )

    async def publish_due_time_reached(self, event: duetime.Event) -> None:
        """Publish the envelope whose payload is ``{tenantId, serviceCallId, dueAt, firedAt}``."""
        # firedAt is when this attempt publishes it (a poller's reachedAt); the envelope's id
        # and the Nats-Msg-Id stay the same on every attempt.
        body = {**event.payload, "firedAt": iso(self.app.clock.now())}
        # Failures become retries with backoff (then the dead-letter queue), per deliver_event.
        await deliver_event(self.destination, replace(event, payload=body))

    async def ensure_streams(self) -> None:
        """Create the command and event streams if they do not exist (idempotent)."""
        nc = await nats.connect(self.topology.nats_url)
        try:
            js = nc.jetstream()
            await ensure_stream(
                js,
                self.topology.commands_stream,
                [self.topology.commands_subject, self.topology.dead_subject],
            )
            await ensure_stream(js, self.topology.events_stream, [self.topology.events_subject])
        finally:
            await nc.close()

    async def run(self, stop: asyncio.Event) -> None:
        """Consume commands and fire timers until ``stop`` is set."""
        await self.ensure_streams()
        try:
            await run_worker_with_sources(self.app, [self.source], stop)
        finally:
            await self.destination.close()
            await self.app.close()


def schedule_timer(tenant_id: str, service_call_id: str, due_at: str) -> dict[str, str]:
    """A ScheduleTimer command body, as the orchestration module would publish it."""
    return {"tenantId": tenant_id, "serviceCallId": service_call_id, "dueAt": due_at}
