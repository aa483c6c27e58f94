"""What every part of one worker uses: its store and clock, its node, what it reports, and the
signal that a handler slot may have come free."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from duetime.clock import Clock
from duetime.model import Timer
from duetime.store.protocol import Store
from duetime.worker.leases import Leases
from duetime.worker.observing import WorkerObserver, WorkerStats

if TYPE_CHECKING:
    from duetime.observability.otel import Tracing


@dataclass(frozen=True, slots=True)
class Shared:
    store: Store
    clock: Clock
    node_id: str
    stats: WorkerStats
    observers: Sequence[WorkerObserver]
    capacity: asyncio.Event
    """Set whenever a slot may have come free (an attempt ended, a write finished)."""
    leases: Leases
    tracing: Tracing | None = None
    """Spans around attempts, when tracing is on (see :mod:`duetime.observability.tracing`)."""

    def about(self, timer: Timer, attempt: int | None = None) -> dict[str, object]:
        """The ``extra=`` of a log line about one timer, so JSON logs carry its fields.

        Built only where a line is logged (failures, warnings): never for a successful job.
        """
        fields: dict[str, object] = {
            "namespace": timer.namespace,
            "type": timer.type,
            "key": timer.key,
            "node": self.node_id,
        }
        if attempt is not None:
            fields["attempt"] = attempt
        if timer.correlation_id is not None:
            fields["correlation_id"] = timer.correlation_id
        return fields
