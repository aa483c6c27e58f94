"""The facade's SQL access: which database roles may call duetime's SQL functions
(``schedule(...)``, ``emit(...)``…) and in which namespaces (``duetime sql grant``).

The functions are PostgreSQL's; a store without them (SQLite) has no ``sql_access`` part, and
asking is an error naming the database URL. Granting and revoking are audited in each namespace
they name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from duetime.app.audit import AuditMethods
from duetime.clock import Clock
from duetime.config import Settings
from duetime.errors import InvalidInput
from duetime.model.audit import Actor
from duetime.store import Store
from duetime.store.parts import SqlAccessStore, require
from duetime.validation import check_namespace

_ROLE_MAX = 63  # PostgreSQL's longest identifier (NAMEDATALEN - 1)


class SqlAccessMethods(AuditMethods):
    """Grants of the SQL functions (mixed into the facade)."""

    store: Store
    clock: Clock
    settings: Settings

    if TYPE_CHECKING:

        async def _open_store(self, *, migrate: bool) -> None: ...

    async def grant_sql(
        self, role: str, namespaces: Sequence[str], *, actor: Actor | None = None
    ) -> list[str]:
        """Let database role ``role`` schedule through the SQL functions into ``namespaces``
        (each must exist) and nowhere else; the functions it may now call. The role gets
        USAGE on the schema and EXECUTE on the functions, never a right on a table."""
        names = _namespaces(namespaces)
        _check_role(role)
        await self._open_store(migrate=self.settings.migrate)
        functions = await self._part().grant_sql(role, names, self.clock.now())
        await self._audit(actor, "sql_grant", {"role": role}, namespaces=names)
        return functions

    async def revoke_sql(
        self, role: str, namespaces: Sequence[str], *, actor: Actor | None = None
    ) -> int:
        """Take ``namespaces`` back from ``role``; how many it held."""
        names = _namespaces(namespaces)
        _check_role(role)
        await self._open_store(migrate=self.settings.migrate)
        revoked = await self._part().revoke_sql(role, names)
        await self._audit(actor, "sql_revoke", {"role": role}, namespaces=names)
        return revoked

    async def sql_grants(self) -> list[tuple[str, str]]:
        """Every ``(role, namespace)`` granted."""
        await self._open_store(migrate=self.settings.migrate)
        return await self._part().sql_grants()

    def _part(self) -> SqlAccessStore:
        return require(
            self.store.sql_access,
            "sql_access",
            self.store,
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
