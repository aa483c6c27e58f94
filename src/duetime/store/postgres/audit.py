"""The audit log in PostgreSQL, in the store's schema and on its connection pool."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from psycopg.rows import dict_row

from duetime.store.audit import AuditColumns, AuditLog
from duetime.store.postgres.database import Conn, Database
from duetime.store.postgres.fetching import fetch_json_as_text
from duetime.store.queries import load_queries
from duetime.store.tokens import TokenRow
from duetime.support.jsontext import load_json

Q = load_queries("duetime.store.postgres", "audit.sql")
T = TypeVar("T")


def _as_is(value: T) -> T:
    return value


COLUMNS = AuditColumns(
    instant_to_column=_as_is, instant_from_column=_as_is, target_from_column=load_json
)
"""psycopg adapts timestamptz itself; the target comes as JSON text (``fetch_json_as_text``),
decoded only for the entries a page answers."""


class PostgresAudit(AuditLog):
    """The audit part of a :class:`~duetime.store.postgres.store.PostgresStore`."""

    def __init__(self, db: Database) -> None:
        async def run(name: str, params: Mapping[str, Any], writes: bool) -> list[TokenRow]:
            async def rows(conn: Conn) -> list[TokenRow]:
                if not writes:  # a listing: its targets as text, bounded by the page
                    return list(await fetch_json_as_text(conn, Q[name], params))
                async with conn.cursor(row_factory=dict_row) as cur:
                    await cur.execute(Q[name], params)
                    return list(await cur.fetchall()) if cur.description else []

            return await (db.write(rows) if writes else db.read(rows))

        super().__init__(COLUMNS, run)
