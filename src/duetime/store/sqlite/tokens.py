"""API token hashes in the SQLite file, on the store's own connection thread and transactions."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime

from duetime.auth import TokenInfo
from duetime.store.codec import dump_json, from_micros, load_json, to_micros
from duetime.store.queries import load_queries
from duetime.store.sqlite.store import SqliteStore
from duetime.store.token_rows import TokenColumns, can_name_a_token, no_such_token, revoke_refused

Q = load_queries("duetime.store.sqlite", "tokens.sql")
COLUMNS = TokenColumns(
    instant_to_column=to_micros,
    instant_from_column=from_micros,
    namespaces_to_column=dump_json,
    namespaces_from_column=load_json,
    flag_to_column=int,
)
"""Instants are integer microseconds, the namespace list is JSON text, a flag is 0 or 1."""


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
        params = COLUMNS.new_token(name, token_hash, namespaces, read_only, now)

        def run(conn: sqlite3.Connection) -> TokenInfo:
            return COLUMNS.token(conn.execute(Q["add_token"], params).fetchone())

        return await self.store._run(self.store._write(run))

    async def find_token(self, token_hash: str) -> TokenInfo | None:
        def run(conn: sqlite3.Connection) -> TokenInfo | None:
            row = conn.execute(Q["find_token"], (token_hash,)).fetchone()
            return None if row is None else COLUMNS.token(row)

        return await self.store._run(run)

    async def list_tokens(self, *, include_revoked: bool = False) -> list[TokenInfo]:
        params = {"include_revoked": int(include_revoked)}

        def run(conn: sqlite3.Connection) -> list[TokenInfo]:
            return [COLUMNS.token(row) for row in conn.execute(Q["list_tokens"], params)]

        return await self.store._run(run)

    async def revoke_token(self, token_id: int, now: datetime) -> TokenInfo:
        if not can_name_a_token(token_id):
            raise no_such_token(token_id)
        params = COLUMNS.stamp(token_id, now)

        def run(conn: sqlite3.Connection) -> TokenInfo:
            row = conn.execute(Q["revoke_token"], params).fetchone()
            if row is not None:
                return COLUMNS.token(row)
            exists = conn.execute(Q["get_token"], (token_id,)).fetchone() is not None
            raise revoke_refused(token_id, exists=exists)

        return await self.store._run(self.store._write(run))

    async def touch_token(self, token_id: int, now: datetime) -> None:
        if not can_name_a_token(token_id):
            return
        params = COLUMNS.stamp(token_id, now)
        await self.store._run(self.store._write(lambda c: c.execute(Q["touch_token"], params)))

    async def has_active_tokens(self) -> bool:
        return await self.store._run(
            lambda c: bool(c.execute(Q["has_active_tokens"]).fetchone()[0])
        )
