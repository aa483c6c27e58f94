"""The tokens part of an app (``app.tokens``): issue, list and revoke the REST API's bearer tokens.

They live in the store's ``tokens`` part; the rules (format, scope, hashing) are
:mod:`duetime.tenancy.auth`'s. Tokens serve every namespace of a database, so these methods do not
create the app's own namespace — issuing a token creates the namespaces it names, since with
auth on the API never creates namespaces by itself.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Iterable, Sequence

from duetime.app.audit import Audit
from duetime.app.context import AppContext
from duetime.model import Page
from duetime.model.audit import Actor
from duetime.model.tokens import TokenInfo
from duetime.store.cursors import decode_token_cursor, encode_token_cursor, page
from duetime.store.tokens import name_taken
from duetime.tenancy.auth import (
    ALL_NAMESPACES,
    IssuedToken,
    check_token_name,
    check_token_namespaces,
    issue_token,
)
from duetime.tenancy.caps import check_token_room
from duetime.validation import check_limit

log = logging.getLogger("duetime.audit")


class Tokens:
    """The API tokens of the app's database.

    Creating and revoking one is audited in each namespace the token may use (a ``*`` token's
    in every namespace there is): each tenant's log says who was given access to it."""

    def __init__(self, context: AppContext, audit: Audit) -> None:
        self._context = context
        self._audit = audit

    async def issue(
        self,
        namespaces: Iterable[str],
        *,
        read_only: bool = False,
        name: str | None = None,
        actor: Actor | None = None,
    ) -> IssuedToken:
        """Create a token for ``namespaces`` (``*`` for all) and the namespaces it names; the
        secret it returns is the only copy there will ever be. At most ``max_tokens`` are
        active, and the namespaces it creates count against ``max_namespaces``."""
        scope = check_token_namespaces(namespaces)
        name = check_token_name(name)
        context = self._context
        store, settings = context.store, context.settings
        await context.open_store()
        await check_token_room(store, settings)
        if name is not None and await store.tokens.token_named(name) is not None:
            raise name_taken(name)  # before its namespaces are made: the insert checks again
        named = [namespace for namespace in scope if namespace != ALL_NAMESPACES]
        now = context.clock.now()
        if named:
            await store.add_namespaces(named, now, settings.max_namespaces, "namespace")
        issued = await issue_token(
            store.tokens, scope, read_only=read_only, name=name, now=now, cap=settings.max_tokens
        )
        await self._audit_token(actor, "token_create", issued.info)
        return issued

    async def list(self, *, include_revoked: bool = False) -> builtins.list[TokenInfo]:
        """Every active token (and the revoked ones with ``include_revoked``), oldest first;
        :meth:`page` pages them (revoked tokens are kept, so they are not capped)."""
        await self._context.open_store()
        return await self._context.store.tokens.list_tokens(include_revoked=include_revoked)

    async def page(
        self, *, include_revoked: bool = False, cursor: str | None = None, limit: int = 100
    ) -> Page[TokenInfo]:
        """One page of :meth:`list`, oldest first; pass ``next_cursor`` back for the
        next."""
        check_limit(limit)
        after = decode_token_cursor(cursor)
        await self._context.open_store()
        rows = await self._context.store.tokens.list_tokens(
            include_revoked=include_revoked, after=after, limit=limit + 1
        )
        return page(rows, limit, lambda info: info, lambda info: encode_token_cursor(info.id))

    async def revoke(self, token_id: int, *, actor: Actor | None = None) -> TokenInfo:
        """Revoke at once; NotFound for an unknown id, Conflict when already revoked."""
        await self._context.open_store()
        info = await self._context.store.tokens.revoke_token(token_id, self._context.clock.now())
        await self._audit_token(actor, "token_revoke", info)
        return info

    async def _audit_token(self, actor: Actor | None, action: str, info: TokenInfo) -> None:
        """The entry goes to each namespace the token reaches. The token is written already: a
        failed read of them must not lose its answer (a new token's secret exists only there),
        so the entry then goes to this app's namespace."""
        namespaces: Sequence[str] = info.namespaces
        if info.all_namespaces:
            try:
                namespaces = await self._context.store.list_namespaces()
            except Exception:
                log.exception("reading the namespaces of a token's audit entry failed")
                namespaces = (self._context.namespace,)
        target = {
            "token": info.id,
            "name": info.name,
            "namespaces": list(info.namespaces),
            "read_only": info.read_only,
        }
        await self._audit.note(actor, action, target, namespaces=namespaces)
