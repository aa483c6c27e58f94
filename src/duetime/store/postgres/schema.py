"""The PostgreSQL schema: numbered migrations, applied once each, under an advisory lock.

Several workers may start on a new schema at once; the lock makes them take turns, and each
applies only what the migrations table does not list yet, in the same transaction.
"""

from __future__ import annotations

from psycopg import sql

from duetime.store.postgres.database import Conn
from duetime.store.postgres.fetching import fetch_all, fetch_value
from duetime.store.queries import load_migrations, load_queries

Q = load_queries("duetime.store.postgres", "schema.sql")
MIGRATIONS = load_migrations("duetime.store.postgres.migrations")


async def migrate(conn: Conn, schema: str) -> list[int]:
    """Create ``schema`` if need be and apply pending migrations; the versions applied now."""
    await conn.execute(Q["lock_migrations"], {"lock": f"duetime:migrate:{schema}"})
    await conn.execute(sql.SQL(Q["create_schema"]).format(schema=sql.Identifier(schema)))
    await conn.execute(Q["create_migrations_table"])
    done = {row["version"] for row in await fetch_all(conn, Q["applied_migrations"], {})}
    applied = []
    for version, name, text in MIGRATIONS:
        if version not in done:
            await conn.execute(text)
            await conn.execute(Q["record_migration"], {"version": version, "name": name})
            applied.append(version)
    return applied


async def schema_version(conn: Conn, schema: str) -> int:
    """The highest migration applied (0 when there is no migrations table yet)."""
    table = f'"{schema}".schema_migrations'
    if not await fetch_value(conn, Q["migrations_table_exists"], {"table": table}):
        return 0
    return max(
        (r["version"] for r in await fetch_all(conn, Q["applied_migrations"], {})), default=0
    )
