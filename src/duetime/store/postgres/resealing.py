"""A rotation batch's writes on PostgreSQL, the hot tables' or the history's (see
:mod:`duetime.store.resealing`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from duetime.store.postgres.database import Conn
from duetime.store.resealing import attempt_writes, timer_writes
from duetime.support.sealing import Sealing


async def reseal_rows(
    conn: Conn,
    sealing: Sealing,
    rows: Sequence[Any],
    attempts: Sequence[Any],
    queries: Mapping[str, str],
    table: str,
) -> int:
    """Write the re-sealed values of ``rows`` and ``attempts`` with ``queries``'
    ``reseal_<table>payload`` and the like (``table``: ``""`` the hot tables, ``"history_"``
    the archive); how many were written."""
    payloads, errors = timer_writes(sealing, list(rows))
    changed = 0
    for write in payloads:
        changed += (await conn.execute(queries[f"reseal_{table}payload"], write)).rowcount
    for write in errors:
        changed += (await conn.execute(queries[f"reseal_{table}last_error"], write)).rowcount
    for write in attempt_writes(sealing, list(attempts)):
        query = queries[f"reseal_{table}attempt_{write['column']}"]
        changed += (await conn.execute(query, write)).rowcount
    return changed
