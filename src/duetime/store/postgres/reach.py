"""Where a caller's connection leads, and whether that is duetime's own schema.

A connection to another database (or another server) would take the outbox's writes without
error — into a duetime schema of the same name there, or not at all — and the app would never
see them: a lost timer. SQLite tells files apart by path; on PostgreSQL a connection is known by
the server's system identifier (made by ``initdb``; readable by most roles), the database's name
and oid, and the oid of duetime's table of timers in it. Where the server's identifier may not
be read, its port stands in.

None of these change while a connection lives (psycopg never reconnects a connection), so each
caller's connection is looked at once and remembered while it lives.
"""

from __future__ import annotations

from dataclasses import dataclass

from duetime.store.postgres.database import Conn
from duetime.store.postgres.fetching import fetch_all, fetch_value
from duetime.store.queries import load_queries

Q = load_queries("duetime.store.postgres", "session.sql")


@dataclass(frozen=True, slots=True)
class Reach:
    """What one connection reaches: its server, its database and duetime's tables there."""

    server: str | None
    """The cluster's system identifier, when the connection's role may read it."""
    port: str
    database: str
    database_oid: int
    timers_oid: int | None
    """duetime's table of timers in the schema asked about; None when there is none."""
    uses_schema: bool
    writes_timers: bool


async def reach_of(conn: Conn, schema: str) -> Reach:
    """Where ``conn`` leads, and what its role may do in ``schema`` there (two short reads)."""
    (row,) = await fetch_all(conn, Q["reach"], {"schema": schema})
    server = None
    if row["sees_server"]:
        server = await fetch_value(conn, Q["server_identity"], {})
    return Reach(
        server=server,
        port=row["port"],
        database=row["database"],
        database_oid=row["database_oid"],
        timers_oid=row["timers_oid"],
        uses_schema=bool(row["uses_schema"]),
        writes_timers=bool(row["writes_timers"]),
    )


def refusal(caller: Reach, app: Reach, schema: str) -> str | None:
    """Why a caller reaching ``caller`` cannot hold the writes of an app reaching ``app``."""
    if caller.server is not None and app.server is not None:
        other_server = caller.server != app.server
    else:
        other_server = caller.port != app.port
    if other_server:
        return (
            "the connection is to another PostgreSQL server than this app's database "
            f"({app.database!r}): timers written there would never be seen by the app; "
            "connect to the app's own server and database"
        )
    if caller.database_oid != app.database_oid:
        return (
            f"the connection is to database {caller.database!r}, not this app's database "
            f"({app.database!r}): timers written there would never be seen by the app"
        )
    if caller.timers_oid is None or caller.timers_oid != app.timers_oid:
        return (
            f"database {caller.database!r} has no duetime schema {schema!r} (is it migrated?)"
            if app.timers_oid is None
            else f"the connection does not reach this app's duetime schema {schema!r}"
        )
    if not (caller.uses_schema and caller.writes_timers):
        return (
            f"the connection's role may not write duetime's tables in schema {schema!r}: "
            "grant it USAGE on the schema and the rights the app's own role has"
        )
    return None
