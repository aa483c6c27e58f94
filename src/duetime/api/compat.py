"""What the API needs that the facade does not offer yet: health, upcoming, nodes.

They reach ``app.store`` here, and only here, until :class:`~duetime.AsyncApp` grows
``ping()`` and ``upcoming()``; then each function becomes a one-line call to the facade.
"""

from __future__ import annotations

from duetime.app.facade import AsyncApp
from duetime.model import Node, Status, Timer

UPCOMING_SCAN = 500
"""Pending timers read per status when looking for the next due ones (see :func:`upcoming`)."""


async def list_nodes(app: AsyncApp) -> list[Node]:
    return await app.nodes()


async def schema_version(app: AsyncApp) -> int:
    """A cheap read that proves the database answers."""
    return await app.store.schema_version()


async def upcoming(app: AsyncApp, limit: int) -> list[Timer]:
    """The next pending timers by ``run_at``, for the dashboard's timeline.

    Exact while a namespace has at most 500 pending timers per status; beyond that they are drawn
    from the newest 500 (an exact answer needs a store query on the pending index).
    """
    found: list[Timer] = []
    for status in (Status.SCHEDULED, Status.RETRYING):
        page = await app.timers.history(status=status, limit=UPCOMING_SCAN)
        found.extend(page.items)
    found.sort(key=lambda timer: (timer.run_at, timer.id))
    return found[:limit]
