"""API token hashes in PostgreSQL, in the store's schema and on its connection pool."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TypeVar

from duetime.auth import TokenInfo
from duetime.store.postgres.database import Conn, fetch_all, fetch_value
from duetime.store.postgres.store import PostgresStore
from duetime.store.queries import load_queries
from duetime.store.token_rows import TokenColumns, can_name_a_token, no_such_token, revoke_refused

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


class PostgresTokenStore:
    """The :class:`~duetime.auth.TokenStore` of a :class:`PostgresStore` (open it first)."""

    def __init__(self, store: PostgresStore) -> None:
        self.store = store

    async def add_token(
        self,
        name: str | None,
        token_hash: str,
        namespaces: Sequence[str],
        read_only: bool,
        now: datetime,
    ) -> TokenInfo:
        params = COLUMNS.new_token(name, token_hash, namespaces, read_only, now)

        async def run(conn: Conn) -> TokenInfo:
            return COLUMNS.token((await fetch_all(conn, Q["add_token"], params))[0])

        return await self.store._db.write(run)

    async def find_token(self, token_hash: str) -> TokenInfo | None:
        async def run(conn: Conn) -> TokenInfo | None:
            rows = await fetch_all(conn, Q["find_token"], {"hash": token_hash})
            return COLUMNS.token(rows[0]) if rows else None

        return await self.store._db.read(run)

    async def list_tokens(self, *, include_revoked: bool = False) -> list[TokenInfo]:
        async def run(conn: Conn) -> list[TokenInfo]:
            rows = await fetch_all(conn, Q["list_tokens"], {"include_revoked": include_revoked})
            return [COLUMNS.token(row) for row in rows]

        return await self.store._db.read(run)

    async def revoke_token(self, token_id: int, now: datetime) -> TokenInfo:
        if not can_name_a_token(token_id):
            raise no_such_token(token_id)
        params = COLUMNS.stamp(token_id, now)

        async def run(conn: Conn) -> TokenInfo:
            rows = await fetch_all(conn, Q["revoke_token"], params)
            if rows:
                return COLUMNS.token(rows[0])
            exists = bool(await fetch_all(conn, Q["get_token"], params))
            raise revoke_refused(token_id, exists=exists)

        return await self.store._db.write(run)

    async def touch_token(self, token_id: int, now: datetime) -> None:
        if not can_name_a_token(token_id):
            return
        params = COLUMNS.stamp(token_id, now)

        async def run(conn: Conn) -> None:
            await conn.execute(Q["touch_token"], params)

        await self.store._db.read(run)

    async def has_active_tokens(self) -> bool:
        async def run(conn: Conn) -> bool:
            return bool(await fetch_value(conn, Q["has_active_tokens"], {}))

        return await self.store._db.read(run)
