"""What every part of one worker uses: its store and clock, its node, the observers it tells,
the leases it holds and the loop its state belongs to. Nothing here is written by the parts:
each keeps its own counters and state (see :class:`~.worker.Worker.stats`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from duetime.clock import Clock
from duetime.model import Timer
from duetime.store.protocol import Store
from duetime.worker.leases import Leases
from duetime.worker.observing import WorkerObserver
from duetime.worker.owner import LoopOwner

if TYPE_CHECKING:
    from duetime.observability.otel import Tracing


@dataclass(frozen=True, slots=True)
class Shared:
    store: Store
    clock: Clock
    node_id: str
    observers: Sequence[WorkerObserver]
    leases: Leases
    tracing: Tracing | None = None
    """Spans around attempts, when tracing is on (see :mod:`duetime.observability.tracing`)."""
    owner: LoopOwner = field(default_factory=LoopOwner)
    """The loop the parts' state belongs to (see :mod:`~duetime.worker.owner`)."""

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
