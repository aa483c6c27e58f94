"""What every part of one worker uses: its store and clock, its node, what it reports, and the
signal that a handler slot may have come free."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from duetime.clock import Clock
from duetime.store.protocol import Store
from duetime.worker.observing import WorkerObserver, WorkerStats


@dataclass(frozen=True, slots=True)
class Shared:
    store: Store
    clock: Clock
    node_id: str
    stats: WorkerStats
    observers: Sequence[WorkerObserver]
    capacity: asyncio.Event
    """Set whenever a slot may have come free (an attempt ended, a write finished)."""
