"""The SQLite file's schema: numbered migrations, applied once each, under the write lock.

Several processes may open a new file at once; ``BEGIN IMMEDIATE`` makes them take turns, and
each applies only what the migrations table does not list yet.
"""

from __future__ import annotations

import sqlite3

from duetime.clock import SystemClock
from duetime.store.codec import to_micros
from duetime.store.queries import load_migrations, load_queries
from duetime.store.sqlite.database import begin_immediate

Q = load_queries("duetime.store.sqlite", "schema.sql")
MIGRATIONS = load_migrations("duetime.store.sqlite.migrations")


def migrate(conn: sqlite3.Connection) -> list[int]:
    """Apply pending migrations in one transaction; the versions applied now."""
    conn.execute(Q["create_migrations_table"])
    begin_immediate(conn)
    try:
        done = {row[0] for row in conn.execute(Q["applied_migrations"])}
        applied = []
        for version, name, sql in MIGRATIONS:
            if version in done:
                continue
            for statement in split_statements(sql):
                conn.execute(statement)
            conn.execute(Q["record_migration"], (version, name, to_micros(SystemClock().now())))
            applied.append(version)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return applied


def schema_version(conn: sqlite3.Connection) -> int:
    """The highest migration applied (0 for a new file)."""
    conn.execute(Q["create_migrations_table"])
    versions = [row[0] for row in conn.execute(Q["applied_migrations"])]
    return max(versions, default=0)


def split_statements(sql: str) -> list[str]:
    """Split a migration into statements (migrations hold no semicolons inside literals; a
    trigger's body, whose statements end in semicolons, stays whole)."""
    lines = [line for line in sql.splitlines() if not line.strip().startswith("--")]
    statements: list[str] = []
    pending = ""
    for part in "\n".join(lines).split(";"):
        pending += part + ";"
        if sqlite3.complete_statement(pending):
            statements.append(pending.strip().rstrip(";").strip())
            pending = ""
    if pending.rstrip(";").strip():
        statements.append(pending.strip().rstrip(";").strip())
    return [statement for statement in statements if statement]
