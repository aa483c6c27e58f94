"""The SQL part of an app (``app.sql``): which database roles may call duetime's SQL functions
(``schedule(...)``, ``emit(...)``…) and in which namespaces (``duetime sql grant``).

The functions are PostgreSQL's; a store without them (SQLite) has no ``sql_access`` part, and
asking is an error naming the database URL. Granting and revoking are audited in each namespace
they name.
"""

from __future__ import annotations

from collections.abc import Sequence

from duetime.app.audit import Audit
from duetime.app.context import AppContext
from duetime.errors import InvalidInput
from duetime.model.audit import Actor
from duetime.store.parts import SqlAccessStore, require
from duetime.validation import check_namespace

_ROLE_MAX = 63  # PostgreSQL's longest identifier (NAMEDATALEN - 1)


class Sql:
    """Grants of the SQL functions."""

    def __init__(self, context: AppContext, audit: Audit) -> None:
        self._context = context
        self._audit = audit

    async def grant(
        self, role: str, namespaces: Sequence[str], *, actor: Actor | None = None
    ) -> list[str]:
        """Let database role ``role`` schedule through the SQL functions into ``namespaces``
        (each must exist) and nowhere else; the functions it may now call. The role gets
        USAGE on the schema and EXECUTE on the functions, never a right on a table."""
        names = _namespaces(namespaces)
        _check_role(role)
        await self._context.open_store()
        functions = await self._part().grant_sql(role, names, self._context.clock.now())
        await self._audit.note(actor, "sql_grant", {"role": role}, namespaces=names)
        return functions

    async def revoke(
        self, role: str, namespaces: Sequence[str], *, actor: Actor | None = None
    ) -> int:
        """Take ``namespaces`` back from ``role``; how many it held."""
        names = _namespaces(namespaces)
        _check_role(role)
        await self._context.open_store()
        revoked = await self._part().revoke_sql(role, names)
        await self._audit.note(actor, "sql_revoke", {"role": role}, namespaces=names)
        return revoked

    async def grants(self) -> list[tuple[str, str]]:
        """Every ``(role, namespace)`` granted."""
        await self._context.open_store()
        return await self._part().sql_grants()

    def _part(self) -> SqlAccessStore:
        store = self._context.store
        return require(
            store.sql_access,
            "sql_access",
            store,
            field="database_url",
            doing="granting the SQL functions",
            hint="they are PostgreSQL functions",
        )


def _namespaces(namespaces: Sequence[str]) -> list[str]:
    if not namespaces:
        raise InvalidInput("namespace", "name at least one namespace the role may use")
    return [check_namespace(name) for name in dict.fromkeys(namespaces)]


def _check_role(role: str) -> None:
    if not role or len(role) > _ROLE_MAX or "\x00" in role:
        raise InvalidInput("role", f"must be a database role name of 1-{_ROLE_MAX} characters")
