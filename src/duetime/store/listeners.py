"""This process's wake-up listeners of one store: each worker adds one to hear of new work."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

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
        for listener in list(self._listeners):
            listener(earliest)
