"""This process's wake-up listeners of one store: each worker adds one to hear of new work."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

log = logging.getLogger("duetime.store")

WakeupListener = Callable[[datetime | None], None]
"""Called with the earliest ``run_at`` just stored (None = unknown: re-read the next due time)."""


class Listeners:
    """The listeners added to a store, called in the order they were added."""

    def __init__(self) -> None:
        self._listeners: list[WakeupListener] = []

    def add(self, listener: WakeupListener) -> None:
        self._listeners.append(listener)

    def remove(self, listener: WakeupListener) -> None:
        """A no-op when ``listener`` is not added."""
        if listener in self._listeners:
            self._listeners.remove(listener)

    def __len__(self) -> int:
        return len(self._listeners)

    def __call__(self, earliest: datetime | None) -> None:
        """Tell each listener; one that fails is logged and the rest still told. They are
        called once a write has committed: a failure here must not become the writer's error,
        which would say that nothing was written (a hint lost costs a re-check, never work)."""
        for listener in list(self._listeners):
            try:
                listener(earliest)
            except Exception:
                log.exception("a wake-up listener failed after a commit; the commit stands")
