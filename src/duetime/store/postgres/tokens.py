"""API token hashes in PostgreSQL, in the store's schema and on its connection pool."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from psycopg.rows import dict_row

from duetime.store.postgres.database import Conn, Database
from duetime.store.queries import load_queries
from duetime.store.tokens import TokenColumns, TokenRow, Tokens

Q = load_queries("duetime.store.postgres", "tokens.sql")
T = TypeVar("T")


def _as_is(value: T) -> T:
    return value


COLUMNS = TokenColumns(
    instant_to_column=_as_is,
    instant_from_column=_as_is,
    namespaces_to_column=_as_is,
    namespaces_from_column=_as_is,
    flag_to_column=_as_is,
)
"""psycopg adapts every column itself: timestamptz, text[] and boolean pass through as they are."""


class PostgresTokens(Tokens):
    """The tokens part of a :class:`~duetime.store.postgres.store.PostgresStore`."""

    def __init__(self, db: Database) -> None:
        lock = {"lock": f"duetime:tokens:{db.settings.schema}"}

        async def run(name: str, params: Mapping[str, Any], writes: bool) -> list[TokenRow]:
            async def rows(conn: Conn) -> list[TokenRow]:
                if name == "add_token":  # its count must see every token added before
                    await conn.execute(Q["lock_tokens"], lock)
                async with conn.cursor(row_factory=dict_row) as cur:
                    await cur.execute(Q[name], params)
                    return list(await cur.fetchall()) if cur.description else []

            return await (db.write(rows) if writes else db.read(rows))

        super().__init__(COLUMNS, run)
