"""A claim whose rows cannot be read after it committed gives them back at once.

The claim commits in the same round trip that brings its rows (:meth:`Database.atomic`), so a
failure while they are read leaves them running under this node's lease, which nothing renews:
they would wait for the lease to run out, be rescued, and — a reading that failed once fails
again — end dead as lost without a handler having run. The claim's token finds exactly its
rows, and they go back as they were.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Sequence
from datetime import datetime
from typing import Any

from duetime.errors import StoreUnavailable
from duetime.model import Claimed
from duetime.store.postgres.database import Database
from duetime.store.postgres.fetching import fetch_all
from duetime.store.queries import load_queries

Q = load_queries("duetime.store.postgres", "claims.sql")
log = logging.getLogger("duetime.store.postgres")


async def give_back_if_unread(
    db: Database,
    claiming: Awaitable[Sequence[list[Any]]],
    node_id: str,
    claim_token: int,
    now: datetime,
) -> list[Claimed]:
    """The claimed rows (the last statement's result of ``claiming``); if reading them fails,
    the claim's rows are given back, and the failure raised. An outage is not given back here
    (the server may be gone): those rows are rescued when their lease runs out."""
    try:
        results = await claiming
    except StoreUnavailable:
        raise
    except Exception:
        params = {"node_id": node_id, "claim_token": claim_token, "now": now}
        try:
            given = await db.read(lambda conn: fetch_all(conn, Q["give_back_claim"], params))
        except Exception:
            log.exception("giving back the rows of a claim that could not be read failed")
        else:
            if given:
                log.error("a claim could not be read: its %d rows were given back", len(given))
        raise
    claimed: list[Claimed] = results[-1]
    return claimed
