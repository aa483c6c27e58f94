"""The audit log in the SQLite file, on the store's own connection thread and transactions."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from typing import Any

from duetime.store.audit import AuditColumns, AuditLog
from duetime.store.codec import from_micros, load_json, to_micros
from duetime.store.queries import load_queries
from duetime.store.sqlite.database import SqliteDatabase
from duetime.store.tokens import TokenRow

Q = load_queries("duetime.store.sqlite", "audit.sql")
COLUMNS = AuditColumns(
    instant_to_column=to_micros, instant_from_column=from_micros, target_from_column=load_json
)
"""Instants are integer microseconds, the target is JSON text."""


class SqliteAudit(AuditLog):
    """The audit part of a :class:`~duetime.store.sqlite.store.SqliteStore`."""

    def __init__(self, db: SqliteDatabase) -> None:
        async def run(name: str, params: Mapping[str, Any], writes: bool) -> list[TokenRow]:
            def rows(conn: sqlite3.Connection) -> list[TokenRow]:
                return list(conn.execute(Q[name], params).fetchall())

            return await (db.write(rows) if writes else db.read(rows))

        super().__init__(COLUMNS, run)
