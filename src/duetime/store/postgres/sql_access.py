"""Which database roles may call the SQL functions (``schedule(...)``, ``emit(...)``…), and in
which namespaces.

The functions run as the schema's owner, so a role needs only USAGE on the schema and EXECUTE
on them: it can read or change no table itself. Each function checks the caller's namespace
against ``sql_grants`` (see migration 0029), so a role granted one namespace is refused in
another. The caps and defaults they obey are the app's settings, kept in ``meta`` rows
(``sql.max_payload_bytes``…) by :meth:`PostgresSqlAccess.keep_settings` each time an app opens
the store.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime

from psycopg import errors, sql

from duetime.errors import InvalidInput
from duetime.model import Schedule
from duetime.model.sql_requests import ScheduleChange
from duetime.store.postgres.database import Conn, Database
from duetime.store.postgres.fetching import fetch_all, fetch_value
from duetime.store.postgres.schedule_rows import schedule_from_row
from duetime.store.queries import load_queries

Q = load_queries("duetime.store.postgres", "sql_access.sql")
log = logging.getLogger("duetime.sql")


class PostgresSqlAccess:
    """The ``sql_access`` part of a PostgreSQL store."""

    def __init__(self, db: Database, schema: str) -> None:
        self._db = db
        self._schema = schema
        self._kept: dict[str, int] = {}
        """The settings this store wrote last: the apps sharing it write them once."""

    async def grant_sql(self, role: str, namespaces: Sequence[str], now: datetime) -> list[str]:
        names = list(dict.fromkeys(namespaces))

        async def run(conn: Conn) -> list[str]:
            if not await fetch_value(conn, Q["role_exists"], {"role": role}):
                raise InvalidInput("role", f"{role!r} is not a role of this database")
            missing = await fetch_all(conn, Q["missing_namespaces"], {"namespaces": names})
            if missing:
                shown = ", ".join(repr(row["name"]) for row in missing)
                raise InvalidInput("namespace", f"{shown} does not exist: create it first")
            rows = await fetch_all(conn, Q["public_functions"], {"schema": self._schema})
            functions = [row["signature"] for row in rows]
            identifiers = {"schema": sql.Identifier(self._schema), "role": sql.Identifier(role)}
            await conn.execute(sql.SQL(Q["grant_usage"]).format(**identifiers))
            for function in functions:
                # regprocedure's text: the function's name and argument types, quoted as needed
                statement = sql.SQL(Q["grant_execute"]).format(
                    function=sql.SQL(function), **identifiers
                )
                await conn.execute(statement)
            await conn.execute(Q["record_grants"], {"role": role, "namespaces": names, "now": now})
            return functions

        return await self._db.write(run)

    async def revoke_sql(self, role: str, namespaces: Sequence[str]) -> int:
        params = {"role": role, "namespaces": list(namespaces)}

        async def run(conn: Conn) -> int:
            return (await conn.execute(Q["revoke_sql"], params)).rowcount

        return await self._db.write(run)

    async def sql_grants(self) -> list[tuple[str, str]]:
        async def run(conn: Conn) -> list[tuple[str, str]]:
            rows = await fetch_all(conn, Q["sql_grants"], {})
            return [(row["role"], row["namespace"]) for row in rows]

        return await self._db.read(run)

    async def pending_schedule_requests(self, limit: int) -> list[ScheduleChange]:
        async def run(conn: Conn) -> list[ScheduleChange]:
            rows = await fetch_all(conn, Q["pending_schedule_requests"], {"limit": limit})
            return [ScheduleChange(**row) for row in rows]

        return await self._db.read(run)

    async def finish_schedule_request(
        self, id: int, failed: bool, outcome: str, now: datetime
    ) -> bool:
        params = {
            "id": id,
            "status": "failed" if failed else "applied",
            "outcome": outcome,
            "now": now,
        }

        async def run(conn: Conn) -> bool:
            return (await conn.execute(Q["finish_schedule_request"], params)).rowcount == 1

        return await self._db.write(run)

    async def previous_schedule(self, request_id: int) -> Schedule | None:
        async def run(conn: Conn) -> Schedule | None:
            rows = await fetch_all(conn, Q["previous_schedule"], {"id": request_id})
            return schedule_from_row(rows[0], self._db.sealing) if rows else None

        return await self._db.read(run)

    async def keep_settings(self, settings: Mapping[str, int], now: datetime) -> None:
        if dict(settings) == self._kept:
            return
        params = {
            "names": list(settings),
            "values": [str(value) for value in settings.values()],
            "now": now,
        }

        async def run(conn: Conn) -> None:
            await conn.execute(Q["keep_settings"], params)

        try:
            await self._db.write(run)
            self._kept = dict(settings)
        except errors.UndefinedTable:
            # A schema not migrated yet (an app opened before `duetime migrate`, as a web
            # framework's process may be): there are no SQL functions to obey the settings
            # either, and the first app opened after the migration writes them.
            log.debug("no meta table yet: the SQL functions' settings are written later")
        except (errors.InsufficientPrivilege, errors.ReadOnlySqlTransaction) as exc:
            # A role that may not write (a read-only replica, a reporting role): the rows stay as
            # the last app that could write them left them.
            log.warning("could not write the SQL functions' settings to meta: %s", exc)
