"""The caps on namespaces and tokens: a database holds at most ``max_namespaces`` namespaces and
``max_tokens`` active tokens, so no token holder can grow what every request, scrape and
listing walks without bound. (Limit rules, schedules and routes are capped where they are made:
``store.limits``, ``add_schedules``, ``route``.)

The store checks each cap in the transaction that creates (see :mod:`duetime.store.room`), so
creations racing for the last place cannot pass it together; :func:`check_token_room` only
refuses early, before a token's namespaces are made for a token that cannot be stored.
"""

from __future__ import annotations

from duetime.config import Settings
from duetime.store import Store
from duetime.store.room import tokens_full


async def check_token_room(store: Store, settings: Settings) -> None:
    """One more active token must leave the database within ``max_tokens`` (CapReached
    otherwise): read before the token's namespaces are created; the insert checks again."""
    cap = settings.max_tokens
    if len(await store.tokens.list_tokens(limit=cap)) >= cap:
        raise tokens_full(cap)
