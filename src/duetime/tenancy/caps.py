"""The caps on namespaces and tokens: a database holds at most ``max_namespaces`` namespaces and
``max_tokens`` active tokens, so no token holder can grow what every request, scrape and
listing walks without bound. (Limit rules, schedules and routes are capped where they are made:
``store.limits``, ``add_schedules``, ``route``.)

Counting reads what the cap allows at most; two creations at the same instant on PostgreSQL may
both take the last place, so a cap can be passed by as many as race for it.
"""

from __future__ import annotations

from collections.abc import Iterable

from duetime.config import Settings
from duetime.errors import CapReached
from duetime.store import Store


async def check_namespace_room(
    store: Store, names: Iterable[str], settings: Settings, field: str
) -> None:
    """Creating ``names`` (those that do not exist yet) must leave the database within
    ``max_namespaces``: CapReached naming ``field`` otherwise."""
    new = [name for name in dict.fromkeys(names) if not await store.namespace_exists(name)]
    if not new:
        return
    cap = settings.max_namespaces
    if len(await store.list_namespaces()) + len(new) > cap:
        raise CapReached(field, "this database", "namespaces", cap, "max_namespaces")


async def check_token_room(store: Store, settings: Settings) -> None:
    """One more active token must leave the database within ``max_tokens``."""
    cap = settings.max_tokens
    if len(await store.tokens.list_tokens()) >= cap:
        raise CapReached("token", "this database", "active tokens", cap, "max_tokens")
