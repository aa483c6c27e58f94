"""API token hashes in PostgreSQL, in the store's schema and on its connection pool."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from duetime.auth import TokenInfo
from duetime.errors import Conflict, NotFound
from duetime.store.postgres.database import Conn, fetch_all, fetch_value
from duetime.store.postgres.rows import Row
from duetime.store.postgres.store import PostgresStore
from duetime.store.queries import load_queries

Q = load_queries("duetime.store.postgres", "tokens.sql")
MAX_ID = 2**63 - 1
"""Ids are ``bigint``: a larger one cannot name a token (and would fail to bind)."""


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
        params = {
            "name": name,
            "hash": token_hash,
            "namespaces": list(namespaces),
            "read_only": read_only,
            "now": now,
        }

        async def run(conn: Conn) -> TokenInfo:
            return token_from_row((await fetch_all(conn, Q["add_token"], params))[0])

        return await self.store._db.write(run)

    async def find_token(self, token_hash: str) -> TokenInfo | None:
        async def run(conn: Conn) -> TokenInfo | None:
            rows = await fetch_all(conn, Q["find_token"], {"hash": token_hash})
            return token_from_row(rows[0]) if rows else None

        return await self.store._db.read(run)

    async def list_tokens(self, *, include_revoked: bool = False) -> list[TokenInfo]:
        async def run(conn: Conn) -> list[TokenInfo]:
            rows = await fetch_all(conn, Q["list_tokens"], {"include_revoked": include_revoked})
            return [token_from_row(row) for row in rows]

        return await self.store._db.read(run)

    async def revoke_token(self, token_id: int, now: datetime) -> TokenInfo:
        if not 0 < token_id <= MAX_ID:
            raise NotFound(f"no token with id {token_id}", field="id")
        params = {"id": token_id, "now": now}

        async def run(conn: Conn) -> TokenInfo:
            rows = await fetch_all(conn, Q["revoke_token"], params)
            if rows:
                return token_from_row(rows[0])
            if not await fetch_all(conn, Q["get_token"], params):
                raise NotFound(f"no token with id {token_id}", field="id")
            raise Conflict(f"token {token_id} is already revoked", field="id")

        return await self.store._db.write(run)

    async def touch_token(self, token_id: int, now: datetime) -> None:
        if not 0 < token_id <= MAX_ID:
            return
        params = {"id": token_id, "now": now}

        async def run(conn: Conn) -> None:
            await conn.execute(Q["touch_token"], params)

        await self.store._db.read(run)

    async def has_active_tokens(self) -> bool:
        async def run(conn: Conn) -> bool:
            return bool(await fetch_value(conn, Q["has_active_tokens"], {}))

        return await self.store._db.read(run)


def token_from_row(row: Row) -> TokenInfo:
    return TokenInfo(
        id=row["id"],
        name=row["name"],
        namespaces=tuple(row["namespaces"]),
        read_only=row["read_only"],
        created_at=row["created_at"],
        revoked_at=row["revoked_at"],
        last_used_at=row["last_used_at"],
    )
