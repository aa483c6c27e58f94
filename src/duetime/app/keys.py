"""The keys part of an app (``app.keys``): seal what is stored with the newest key of
``DUETIME_SEAL_KEYS`` (``duetime keys rotate``).

Re-sealing walks every table that holds a payload or an error — timers by id, then schedules
and each namespace's archive — a batch a transaction, each value written only over the one read,
so it is safe beside running workers and resumable from where it stopped.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial

from duetime.app.context import AppContext
from duetime.errors import InvalidInput
from duetime.validation import check_limit


class Keys:
    """Rotate the keys sealing stored payloads and errors."""

    def __init__(self, context: AppContext) -> None:
        self._context = context

    async def rotate(
        self,
        *,
        after: int = 0,
        batch: int = 500,
        progress: Callable[[int, int], None] | None = None,
    ) -> int:
        """Seal every stored payload (timers, deliveries, schedules, PostgreSQL's archive), last
        error, attempt error and traceback with the first key of ``DUETIME_SEAL_KEYS`` — plain
        ones too, payloads in the namespaces that seal — ``batch`` rows a transaction; returns
        how many values changed. Safe beside running workers (each value is written only over
        the one read, so what a worker wrote meanwhile stays) and resumable: timers are walked
        by id from ``after``, and ``progress(changed, last id)`` after each of their batches
        says where to start again (schedules and the archive are walked again whole: the rows
        done need no change)."""
        await self._context.open()
        store = self._context.store
        if not store.sealing.enabled:
            raise InvalidInput("seal_keys", "is empty: there is no key to seal with")
        check_limit(batch, "batch", maximum=10_000)
        changed = await _walk(lambda at: store.schedules.reseal(at, batch))
        while True:
            step, last = await store.reseal(after, batch)
            if last is None:
                break
            changed, after = changed + step, last
            if progress is not None:
                progress(changed, after)
        names: list[str] = []
        while page := await store.list_namespaces(names[-1] if names else "", 1000):
            names.extend(page)
        for name in names:
            changed += await _walk(partial(store.history.reseal, name, limit=batch))
        return changed


async def _walk(step: Callable[[int], Awaitable[tuple[int, int | None]]]) -> int:
    """Run a re-sealing ``step`` from id 0 until it reads no more rows; the values changed."""
    changed, at = 0, 0
    while True:
        count, last = await step(at)
        if last is None:
            return changed
        changed, at = changed + count, last
