"""Starting while the database is away: wait for it, with backoff, rather than exit.

Workers are restarted by supervisors at any moment, also while the database restarts or drops
its connections; a worker that exited on the first refused connection would die of an outage
it could simply have waited out. Only :class:`~duetime.errors.StoreUnavailable` is waited
out: any other error at start (a migration's failed statement, a bad setting) is raised at
once, since waiting would not mend it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta

from duetime.errors import StoreUnavailable
from duetime.timemath.backoff import Backoff

log = logging.getLogger("duetime.services")

START_BACKOFF = Backoff(timedelta(seconds=0.5), timedelta(seconds=10))
"""The waits between attempts: short at first (a dropped connection is back at once), at most
ten seconds (a restarting server is used soon after it is back)."""


async def until_available(
    attempt: Callable[[], Awaitable[object]], what: str, stop: asyncio.Event
) -> bool:
    """Run ``attempt`` until it does not raise :class:`StoreUnavailable`, waiting between
    tries; True once it succeeded, False when ``stop`` was set while it waited."""
    failures = 0
    while True:
        try:
            await attempt()
        except StoreUnavailable as exc:
            failures += 1
            wait = START_BACKOFF.delay(failures).total_seconds()
            log.warning(
                "database unavailable at start (%s): retrying in %.1f s: %s", what, wait, exc
            )
            if await _stopped_within(stop, wait):
                return False
            continue
        if failures:
            log.info("database available again: %s after %d failed tries", what, failures)
        return True


async def _stopped_within(stop: asyncio.Event, seconds: float) -> bool:
    try:
        await asyncio.wait_for(stop.wait(), timeout=seconds)
    except TimeoutError:
        return stop.is_set()
    return True
