"""API token hashes in the SQLite file, on the store's own connection thread and transactions."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime

from duetime.auth import TokenInfo
from duetime.errors import Conflict, NotFound
from duetime.store.codec import dump_json, from_micros, load_json, maybe_from_micros, to_micros
from duetime.store.queries import load_queries
from duetime.store.sqlite.store import SqliteStore

Q = load_queries("duetime.store.sqlite", "tokens.sql")
MAX_ID = 2**63 - 1
"""SQLite integers are 64-bit: a larger id cannot name a token (and would fail to bind)."""


class SqliteTokenStore:
    """The :class:`~duetime.auth.TokenStore` of a :class:`SqliteStore` (open it first)."""

    def __init__(self, store: SqliteStore) -> None:
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
            "namespaces": dump_json(list(namespaces)),
            "read_only": int(read_only),
            "now": to_micros(now),
        }

        def run(conn: sqlite3.Connection) -> TokenInfo:
            return token_from_row(conn.execute(Q["add_token"], params).fetchone())

        return await self.store._run(self.store._write(run))

    async def find_token(self, token_hash: str) -> TokenInfo | None:
        def run(conn: sqlite3.Connection) -> TokenInfo | None:
            row = conn.execute(Q["find_token"], (token_hash,)).fetchone()
            return None if row is None else token_from_row(row)

        return await self.store._run(run)

    async def list_tokens(self, *, include_revoked: bool = False) -> list[TokenInfo]:
        params = {"include_revoked": int(include_revoked)}

        def run(conn: sqlite3.Connection) -> list[TokenInfo]:
            return [token_from_row(row) for row in conn.execute(Q["list_tokens"], params)]

        return await self.store._run(run)

    async def revoke_token(self, token_id: int, now: datetime) -> TokenInfo:
        if not 0 < token_id <= MAX_ID:
            raise NotFound(f"no token with id {token_id}", field="id")
        params = {"id": token_id, "now": to_micros(now)}

        def run(conn: sqlite3.Connection) -> TokenInfo:
            row = conn.execute(Q["revoke_token"], params).fetchone()
            if row is not None:
                return token_from_row(row)
            if conn.execute(Q["get_token"], (token_id,)).fetchone() is None:
                raise NotFound(f"no token with id {token_id}", field="id")
            raise Conflict(f"token {token_id} is already revoked", field="id")

        return await self.store._run(self.store._write(run))

    async def touch_token(self, token_id: int, now: datetime) -> None:
        if not 0 < token_id <= MAX_ID:
            return
        params = {"id": token_id, "now": to_micros(now)}
        await self.store._run(self.store._write(lambda c: c.execute(Q["touch_token"], params)))

    async def has_active_tokens(self) -> bool:
        return await self.store._run(
            lambda c: bool(c.execute(Q["has_active_tokens"]).fetchone()[0])
        )


def token_from_row(row: sqlite3.Row) -> TokenInfo:
    return TokenInfo(
        id=row["id"],
        name=row["name"],
        namespaces=tuple(load_json(row["namespaces"])),
        read_only=bool(row["read_only"]),
        created_at=from_micros(row["created_at"]),
        revoked_at=maybe_from_micros(row["revoked_at"]),
        last_used_at=maybe_from_micros(row["last_used_at"]),
    )
