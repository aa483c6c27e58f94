"""The namespaces part of an app (``app.namespaces``): the database's namespaces, and new ones.

Namespaces serve every app of a database, so reading them does not create the app's own; a new
one's audit log starts with who created it, and there are at most ``max_namespaces`` of them.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence

from duetime.app.audit import Audit
from duetime.app.context import AppContext
from duetime.app.deprecation import warn_moved
from duetime.model import Page
from duetime.model.audit import Actor
from duetime.store import Store
from duetime.store.cursors import decode_name_cursor, encode_name_cursor, page
from duetime.validation import check_limit, check_namespace


async def namespace_page(
    store: Store, cursor: str | None, limit: int, only: Sequence[str] | None
) -> Page[str]:
    """A page of the store's namespaces by name (see :meth:`Namespaces.page`), read from a store
    that is open already: the REST API answers 503 until its lifespan opened it."""
    check_limit(limit)
    after = decode_name_cursor(cursor)
    rows = await store.list_namespaces(after, limit + 1, only)
    return page(rows, limit, lambda name: name, encode_name_cursor)


class Namespaces:
    """Create namespaces and list them."""

    def __init__(self, context: AppContext, audit: Audit) -> None:
        self._context = context
        self._audit = audit

    async def add(self, name: str, *, actor: Actor | None = None) -> bool:
        """Create namespace ``name`` (True) unless it exists (False): ``duetime namespaces
        create`` and ``POST /v1/namespaces``; at most ``max_namespaces`` of them. A new one's
        audit log starts with who created it."""
        name = check_namespace(name)
        context = self._context
        await context.open_store()
        cap = context.settings.max_namespaces
        created = bool(await context.store.add_namespaces([name], context.clock.now(), cap, "name"))
        if created:
            target = {"namespace": name}
            await self._audit.note(actor, "namespace_create", target, namespaces=[name])
        return created

    async def list(self) -> builtins.list[str]:
        """Every namespace of the database, by name (at most ``max_namespaces`` made through
        the capped ways); :meth:`page` pages them."""
        await self._context.open_store()
        return await self._context.store.list_namespaces()

    async def page(
        self, *, cursor: str | None = None, limit: int = 100, only: Sequence[str] | None = None
    ) -> Page[str]:
        """One page of :meth:`list`, by name; pass ``next_cursor`` back for the next. ``only``:
        those of these names (a token's scope), so a page never skips past names the caller
        may not see."""
        check_limit(limit)
        await self._context.open_store()
        return await namespace_page(self._context.store, cursor, limit, only)

    async def __call__(self) -> builtins.list[str]:
        """Deprecated: ``app.namespaces()`` is :meth:`list`."""
        warn_moved("namespaces()", "namespaces.list()")
        return await self.list()
